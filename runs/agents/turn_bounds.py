"""What one model turn may hand over, and what an answer is.

A model is a neighbour that may misbehave: a turn of megabytes of text, or of thousands of
tool calls, would be stored on the turn's row and sent back to the model at every turn
after it. So:

- a turn's text is kept on its row up to RUNS_AGENT_TEXT_MAX_CHARS characters, cut past it
  saying how long it was (runs.machine.transitions.agent_turns.storable_turn). A final
  answer (a turn with no tool call) is the step's result, and a result is never cut: one
  longer than the bound is written whole as an artifact first (answer_kept_apart), its
  reference kept on the turn, and the step's result refers to it, never a second copy
  (artifacts.kept_with_parts); one over RUNS_RESULT_MAX_BYTES is refused as a
  rejected output is (never stored; the run stops for a person, naming size and limit);
- a turn asking for more tool calls than its agent's AgentBudget(max_calls_per_turn), or
  than RUNS_AGENT_TURN_MAX_TOOL_CALLS where lower or undeclared, is refused as a whole
  (AgentTurn.refused): none of its calls is made or has a row, and the model is told at
  its next turn, as it is told of a call whose arguments fail their schema; each such turn
  counts against the agent's schema error budget, so a model that keeps asking for too
  many stops the run for a person.
"""

import dataclasses
import json

from ..machine import artifacts, transitions
from ..machine.context import StepContext
from ..machine.errors import Classified, TransientError, classify
from ..machine.transitions import agent_budgets
from ..machine.transitions import agent_calls as calls_tx
from ..machine.transitions import agent_turns as turns_tx
from ..models import ErrorClass, Step


def said_nothing(turn) -> bool:
    """Whether a stored ordinary turn holds neither text nor a tool call (a refused turn
    asked for calls: it said something, and is told why none was made)."""
    return not turn.summarises and not turn.tool_calls and not turn.refused \
        and not str(turn.content or "").strip()


def is_answer(turn) -> bool:
    """Whether a stored turn is the model's final answer: text and no tool call, asked for
    or refused."""
    return not turn.tool_calls and not turn.summarises and not turn.refused \
        and not said_nothing(turn)


def refused_message(turn, spec) -> dict:
    """What the model is told after a turn whose tool calls were refused as a whole."""
    most, _ = artifacts.turn_calls_limit(spec.budget.max_calls_per_turn)
    return {"role": "user", "content": (
        f"Your last answer was refused and none of its tool calls was made: {turn.refused}. "
        f"Ask for at most {most} tool calls in one answer.")}


def silent_answers(lease: transitions.Lease, step: Step,
                   spec) -> transitions.Outcome | None:
    """After a turn was stored: the step's model format error when the model has now said
    nothing more often than the agent's schema error budget allows, else None. Counted as
    its tool calls' schema errors are (the turns since the budget began,
    agent_budgets.turns_in_budget), and checked only when a turn was just stored."""
    if lease.finished or lease.work is None or lease.work.name != step.name \
            or lease.compensating:
        return None
    turns = list(agent_budgets.turns_in_budget(lease.by_name(step.name))[0].order_by("index"))
    if not turns or not said_nothing(turns[-1]):
        return None
    silent = sum(1 for t in turns if said_nothing(t))
    if silent <= spec.schema_error_budget:
        return None
    return transitions.Outcome(succeeded=False, error=Classified(
        ErrorClass.MODEL_FORMAT,
        f"the model answered {silent} times with neither text nor a tool call (budget "
        f"{spec.schema_error_budget}); the last: turn {turns[-1].index}, finish reason "
        f"{turns[-1].finish_reason!r}"))


def answer_kept_apart(ctx: StepContext, turn: calls_tx.ModelTurn) -> transitions.Outcome:
    """The turn as it is to be stored, as an Outcome whose value is the turn: a final answer
    longer than RUNS_AGENT_TEXT_MAX_CHARS with the reference of the artifact holding it
    whole (written now, named by its content: a crash before the turn is stored writes the
    same one again); or the step's error for one over RUNS_RESULT_MAX_BYTES, naming size
    and limit: the answer is never stored, as a rejected output is not (a stored turn
    without its whole answer would be taken for the answer at a person's resume)."""
    calls = turn.tool_calls
    if turn.summarises or (calls and isinstance(calls, list)):
        return transitions.Outcome(succeeded=True, value=turn)
    text = turns_tx.kept_text(turn.content)
    if len(text) <= artifacts.text_limit():
        return transitions.Outcome(succeeded=True, value=turn)
    size = len(artifacts.encoded(text))
    if size > artifacts.result_limit():
        return transitions.Outcome(succeeded=False, error=Classified(
            ErrorClass.PERMANENT,
            f"the model's final answer is {size:,} bytes, over the limit of "
            f"{artifacts.result_limit():,} bytes (RUNS_RESULT_MAX_BYTES)"))
    try:
        reference = artifacts.write(ctx.run_id, f"{ctx.step}-answer", text)
    except Exception as exc:
        # The storage out of reach: nothing stored yet, the step tries again by its policy.
        return transitions.Outcome(succeeded=False, error=classify(TransientError(
            f"the model's final answer could not be kept apart: {type(exc).__name__}: "
            f"{exc}")))
    return transitions.Outcome(succeeded=True,
                               value=dataclasses.replace(turn, transcript=reference))


def final_outcome(ctx: StepContext, turns, calls) -> transitions.Outcome:
    """The step's Outcome once the model answered: its result kept by the one rule of every
    step's result (artifacts.kept_result), apart as an artifact when large and refused past
    the limit (the answer is the model's: a read's error, as a decision's output too big).
    An answer its turn keeps whole apart is the result's by that artifact's reference
    (artifacts.kept_with_parts): written again inside the result, it would be stored twice."""
    try:
        result = final_result(turns, calls)
    except artifacts.ArtifactUnreadable as exc:
        # Its file missing or changed: trying again reads the same, a person looks.
        return transitions.Outcome(succeeded=False, error=Classified(
            ErrorClass.UNCLASSIFIED, f"the model's final answer cannot be read: {exc}"))
    if turns[-1].transcript:
        value, too_large = artifacts.kept_with_parts(
            result, {"answer": turns[-1].transcript})
    else:
        value, too_large = artifacts.kept_result(ctx.run_id, ctx.step, result,
                                                 has_side_effect=False)
    if too_large is not None:
        return transitions.Outcome(succeeded=False, error=too_large)
    return transitions.Outcome(succeeded=True, value=value)


def final_result(turns, calls) -> dict:
    last = turns[-1]
    # A long answer is whole in its artifact; the turn's content keeps only its start.
    answer = json.loads(artifacts.read(last.transcript)) if last.transcript else last.content
    # Not "tokens": the result passes the redaction filter, which masks a key naming a token.
    return {"answer": answer, "turns": len(turns), "tool_calls": len(calls),
            "usage": {"prompt": sum(t.prompt_tokens for t in turns),
                      "completion": sum(t.completion_tokens for t in turns)}}
