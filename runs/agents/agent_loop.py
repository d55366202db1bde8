"""The executor of agent steps: under the run's lease, settle what a crash left behind, run
the model's tool calls one at a time with a checkpoint before and after each, and ask the
model for its next turn only once every call of the last one is settled.

Order of work, each time round (every decision is re-read from the database, so a worker
that takes over after a crash starts from exactly the same place):
1. calls left running by a dead worker: unknown (a write or notify may have acted);
2. unknown calls: looked up by key with the tool's reconcile function, then settled;
3. the next pending or due call: approval first if its tool needs one (bound to the hash
   of its arguments), then intent, the call with its own key, outcome;
4. the last stored turn had no tool calls: that answer is the step's result;
5. otherwise the model is asked (messages rebuilt from the stored turns and tool results),
   and its answer is stored before anything it asks for runs. A conversation past the
   agent's context budget is first summarised by a stored turn (runs.agents.agent_history),
   the transcript of the turns it covers written as an artifact before the model is asked.

The model is asked through the openai client against settings.MODEL_BASE_URL. A model call
changes nothing, so its errors are transient or permanent, never unknown; they are the
step's errors (retried by the step's policy, stored turns reused).
"""

import dataclasses
import functools
import json
import logging
from typing import TYPE_CHECKING

from django.conf import settings

from ..agent_models import ToolCall, ToolCallStatus
from ..definitions import definition
from ..machine import (
    crashpoints,
    deadline,
    heartbeats,
    limits,
    lookups,
    sensitive,
    tracing,
    transitions,
)
from ..machine.context import StepContext
from ..machine.errors import (
    CODE_FAILURES,
    Classified,
    ModelFormatError,
    TransientError,
    classify,
    model_call_error,
    model_call_errors,
)
from ..machine.invocation import invoke
from ..machine.storable import printable
from ..machine.transitions import agent_budgets, in_flight, tool_call_rules
from ..machine.transitions import agent_calls as calls_tx
from ..machine.transitions import agent_compensation as undo_tx
from ..machine.transitions import agent_turns as turns_tx
from ..models import ErrorClass, Step
from . import agent_history, tool_call_undo, tool_results, turn_bounds

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)
S = ToolCallStatus
# A crash point after a model turn was stored ("after_turn:<step>"), for the drills.
AFTER_TURN = "after_turn"


def run_agent_step(lease: transitions.Lease, step: Step, spec: definition.AgentSpec,
                   ctx: StepContext) -> transitions.Lease | transitions.Outcome:
    """Advance the agent step as far as it goes under this lease. Returns the lease when a
    transition stopped the work (waiting, attention, lease lost), or the step's Outcome
    (its final answer, or the model's error) for the lease cycle to record."""
    name = step.name
    client = None
    # The calls before a turn that take a place in the budget: read once for each turn.
    placed: dict[int, int] = {}
    try:
        while True:
            # The lease moved on: to another step, or to undoing this one (a call's failure
            # started the workflow's automatic compensation, which begins with this agent).
            if lease.finished or lease.work is None or lease.work.name != name \
                    or lease.compensating:
                return lease
            step = lease.by_name(name)
            calls = tool_call_rules.newest_turn_calls(step)
            if not any(c.status in tool_call_rules.OPEN for c in calls):
                # Nothing left to work in the newest turn: every call, for the model's
                # next turn (and, as a guard, any call an older turn left open).
                calls = tool_call_rules.calls_of(step)
            running = [c for c in calls if c.status == S.RUNNING]
            if running:
                lease = calls_tx.take_back_calls(lease, step, running)
                continue
            unworkable = tool_call_rules.unworkable_call(calls, spec, code_of(lease))
            if unworkable is not None:
                return calls_tx.call_unworkable(lease, step, *unworkable)
            unknown = next((c for c in calls if c.status == S.UNKNOWN), None)
            if unknown is not None:
                tool = spec.tools.get(unknown.tool)
                with heartbeats.calling(lease):
                    verdict, error = ask_tool_remote(tool, tool_context(ctx, unknown),
                                                     unknown)
                logger.info("%s tool call %s (%s): outcome unknown; lookup by key: %s",
                            name, unknown.ref, unknown.tool, lookups.verdict_text(verdict))
                lease = calls_tx.settle_tool_call(lease, step, unknown, verdict, error=error)
                continue
            # A call still waiting for a person is due too: a run resumed from attention
            # (its approval request could not be made, say) comes here with the call
            # undecided, and begin_tool_call holds it for a person again, the one wait path.
            due = next((c for c in calls if c.status in (S.PENDING, S.SCHEDULED, S.WAITING)),
                       None)
            if due is not None:
                first = calls[0].turn
                if first not in placed:
                    placed[first] = tool_call_rules.counted_before(step, first)
                past = past_call_budget(calls, spec, due, earlier=placed[first])
                if past is not None:
                    return turns_tx.agent_budget_spent(lease, step, past)
                lease = _run_call(lease, step, spec, ctx, due)
                continue
            turns = calls_tx.turns_of(step)
            # A turn that says nothing, or whose calls were refused, is no answer: the model
            # is asked again (and told why).
            if turns and turn_bounds.is_answer(turns[-1]):
                return turn_bounds.final_outcome(ctx, turns, calls)
            spent = agent_budgets.budget_spent(step, spec, asking=True)
            if spent is not None:
                return turns_tx.agent_budget_spent(lease, step, spent[1])
            # A cancel request is read before every model turn (and, under the run's lock,
            # before every tool call): nothing new starts once it has committed.
            lease = turns_tx.stop_if_cancelled(lease, step,
                                               where=f"before model turn {len(turns)}")
            if lease.finished:
                return lease
            # A transition written again after a clash read the rows again (clashes).
            step = lease.by_name(name)
            if client is None:
                client = model_client()
            try:
                # The workflow's prompt function runs here: what it raises is the step's
                # error, classified as a step function's is, never a worker's crash.
                conversation = messages(spec, ctx, turns, calls)
                cut = agent_history.summary_cut(spec.context_budget, spec.keep_turns,
                                                conversation, turns)
                older = None if cut is None else messages(spec, ctx, turns, calls, until=cut)
            except CODE_FAILURES as exc:
                return transitions.Outcome(succeeded=False, error=classify(exc))
            summary = None
            if cut is not None:
                kept = keep_transcript(step, turns, calls, cut)
                if not kept.succeeded:
                    return kept
                summary = (cut, older, kept.value)
            # A partial, not a lambda: the call is made here, in this pass of the loop.
            with heartbeats.calling(lease):
                asked = limits.call_within_limits(
                    spec.model_system, ctx,
                    functools.partial(_ask, client, spec, ctx, conversation, summary),
                    refused=transitions.Outcome.failure)
            if not asked.succeeded:
                return asked
            if cut is not None:
                crashpoints.reach(agent_history.BEFORE_SUMMARY, name)
            # A long final answer is kept whole apart before its turn is stored, cut.
            answer = turn_bounds.answer_kept_apart(ctx, asked.value)
            if not answer.succeeded:
                return answer
            lease = turns_tx.record_agent_turn(lease, step, answer.value)
            step = lease.by_name(name)
            crashpoints.reach(AFTER_TURN if cut is None else agent_history.AFTER_SUMMARY, name)
            silent = turn_bounds.silent_answers(lease, step, spec)
            if silent is not None:
                return silent
    finally:
        if client is not None:
            client.close()


def past_call_budget(calls: list[ToolCall], spec: definition.AgentSpec,
                     due: ToolCall, *, earlier: int = 0) -> str | None:
    """Why `due` is not made, or None: the model asked for more calls than the agent's
    budget allows and `due` (by its place in the conversation) is past it. The turn that
    asked for them stopped the run; a person's resume must not make them all the same.
    `calls` are the step's calls from some turn on, `earlier` the counted ones before it."""
    most = spec.budget.max_tool_calls
    # A call a person cancelled was never made, as agent_budgets.budget_spent counts: it takes
    # no place, or cancelling the calls past the budget would still leave the last out.
    counted = [c for c in calls if c.status != S.CANCELLED]
    place = earlier + next(i for i, c in enumerate(counted, 1) if c.pk == due.pk)
    if place <= most:
        return None
    return (f"tool call budget spent: tool call {due.ref} ({due.tool}) is call {place} of "
            f"the {earlier + len(counted)} the model asked for and nobody cancelled, at most "
            f"{most}: "
            "it is not made (a person cancels it, or ends the run)")


def _ask(client, spec: definition.AgentSpec, ctx: StepContext, conversation: list[dict],
         summary: tuple[int, list[dict], dict] | None) -> transitions.Outcome:
    """One model turn (or, with `summary`, the summary of the turns before its cut) as an
    Outcome whose value is the turn."""
    try:
        with tracing.step_span(ctx, kind="model", what="model call"), \
                deadline.bounded(f"model turn of {spec.name}"):
            if summary is None:
                turn = ask_model(client, spec, conversation)
            else:
                turn = ask_for_summary(client, spec, *summary)
    except CODE_FAILURES as exc:
        # A malformed answer is kept for diagnosis (ModelFormatError.output), as a decision's.
        return transitions.Outcome(succeeded=False, error=classify(exc),
                                   invalid_output=getattr(exc, "output", None))
    return transitions.Outcome(succeeded=True, value=turn)


def keep_transcript(step: Step, turns, calls: list[ToolCall], cut: int) -> transitions.Outcome:
    """The transcript of the turns a summary will cover, written before the model is asked
    for it (runs.agents.agent_history), as an Outcome whose value is its reference."""
    try:
        reference = agent_history.keep_transcript(step, turns, calls, cut)
    except Exception as exc:
        # The storage out of reach: nothing was asked yet, the step tries again by its policy.
        return transitions.Outcome(succeeded=False, error=classify(TransientError(
            f"the summary's transcript could not be written: {type(exc).__name__}: {exc}")))
    return transitions.Outcome(succeeded=True, value=reference)


def _run_call(lease, step: Step, spec: definition.AgentSpec, ctx: StepContext, call: ToolCall):
    tool = spec.tools[call.tool]
    try:
        args = tool.args.model_validate(sensitive.opened(call.arguments))
    except sensitive.UnreadableValue as exc:
        # Before its intent: not made, and not done (errors.classify, effects.fail).
        return calls_tx.call_not_made(lease, step, call, classify(exc))
    # None: nothing is sent (it waits for a person's approval, a cancel, a lost lease).
    call = calls_tx.begin_tool_call(lease, step, call)
    if call is None:
        return lease
    # The step's row as the lease holds it now: the intent may have been written again
    # after a clash, from rows read again (clashes).
    step = lease.by_name(step.name)
    point = f"{step.name}/{call.tool}"
    crashpoints.reach(crashpoints.BEFORE_CALL, point)
    if crashpoints.injected_failure(point):
        outcome = transitions.Outcome(succeeded=False, error=Classified(
            ErrorClass.PERMANENT, f"drill: injected permanent failure of {point}"))
    else:
        call_ctx = tool_context(ctx, call)
        with heartbeats.calling(lease), \
                tracing.step_span(call_ctx, kind="tool", what=f"tool {call.tool}") as span:
            # Within its system's rate, as a step's call (runs.machine.limits).
            outcome = limits.call_within_limits(
                tool.system, call_ctx, lambda: call_tool(tool, call_ctx, args),
                refused=transitions.Outcome.failure)
            tracing.record_outcome(span, outcome)
    crashpoints.reach(crashpoints.AFTER_CALL, point)
    outcome = tool_results.kept(lease, step, call, tool, outcome)  # as a step's result is
    return calls_tx.record_tool_outcome(lease, step, call, outcome)


def code_of(lease: transitions.Lease) -> str:
    """The workflow version the lease works, as a person names it."""
    return f"{lease.run.workflow_name} v{lease.run.workflow_version}"


def tool_context(ctx: StepContext, call: ToolCall, *,
                 compensating: bool = False) -> StepContext:
    """The step's context, narrowed to one tool call: its own key, attempt and reference."""
    if compensating:
        return dataclasses.replace(ctx, key=call.compensation_key,
                                   attempt=call.compensation_attempt,
                                   remote_ref=call.remote_ref)
    return dataclasses.replace(ctx, key=call.idempotency_key, attempt=call.attempt,
                               remote_ref=call.remote_ref)


def call_tool(tool: definition.ToolSpec, ctx: StepContext, args) -> transitions.Outcome:
    """Call a tool function and turn whatever happens into a classified Outcome."""
    return invoke(f"tool {tool.name}", "tool", tool.fn, ctx, args, retry=tool.retry)


def ask_tool_remote(tool: definition.ToolSpec | None, ctx: StepContext, call: ToolCall):
    """Look a tool call's effect up by its key: (verdict, error), as executor.ask_remote."""
    if tool is None or tool.reconcile_fn is None:
        return None, ""

    def reconcile():
        # Opened within the lookup: arguments that cannot be opened make it LookupUnreadable,
        # as a step's earlier result its lookup cannot open does.
        return tool.reconcile_fn(ctx, tool.args.model_validate(sensitive.opened(call.arguments)))

    # A found result is sealed and kept as the call's own result is (tool_results.kept).
    verdict, error = lookups.ask(ctx, kind="tool", what=f"lookup {call.tool}",
                                 reconcile=reconcile,
                                 stem=f"{ctx.step}-{call.tool}",
                                 sealed=lambda value: sensitive.seal_result(value, tool))
    return verdict, printable(error)


def compensate_agent_step(lease: transitions.Lease, step: Step, spec: definition.AgentSpec,
                          ctx: StepContext) -> transitions.Lease | transitions.Outcome:
    """The agent step's compensation: its tool calls' undos, newest first, each with its
    own key and a checkpoint before and after. Returns the step's compensation Outcome
    (a failure leaves the failed call to be sent again with its key while resends remain,
    effects.undo_outcome). The
    undo of a high-impact call is sent only once a person confirmed it: before that, the run
    stops for them (the lease returned, finished)."""
    calls = tool_call_rules.calls_of(step)
    unworkable = tool_call_rules.unworkable_call(calls, spec, code_of(lease), compensating=True)
    if unworkable is not None:
        return calls_tx.call_unworkable(lease, step, *unworkable)
    order = in_flight.compensation_order(calls)
    for i, call in enumerate(order):
        tool = spec.tools[call.tool]
        call = undo_tx.begin_tool_compensation(lease, step, call, behind=order[i + 1:])
        if call is None:
            return lease
        # Written again after a clash, a transition read the rows again (clashes).
        step = lease.by_name(step.name)
        point = f"{step.name}/{call.tool}:compensate"
        crashpoints.reach(crashpoints.BEFORE_CALL, point)
        with heartbeats.calling(lease):
            undo = tool_call_undo.sent(tool, tool_context(ctx, call, compensating=True), call)
        if not undo.succeeded:
            return undo
        crashpoints.reach(crashpoints.AFTER_CALL, point)
        lease = undo_tx.record_tool_compensation(lease, step, call, undo)
        if lease.finished:
            return lease
        step = lease.by_name(step.name)
    return transitions.Outcome(succeeded=True, value=None)


# --- the conversation ----------------------------------------------------------------------

def messages(spec: definition.AgentSpec, ctx: StepContext, turns, calls: list[ToolCall], *,
             until: int | None = None) -> list[dict]:
    """The conversation so far, rebuilt from what is stored: the same every time. The
    newest summary turn stands for the turns it covers; `until`: only the turns before
    that index."""
    task = spec.prompt_fn(ctx) if spec.prompt_fn else json.dumps(
        ctx.input.model_dump(mode="json"), sort_keys=True)
    out = [{"role": "system", "content": spec.system_prompt},
           {"role": "user", "content": str(task)}]
    summary, shown = agent_history.visible(turns)
    if summary is not None:
        out.append(agent_history.summary_message(summary))
    by_turn: dict[int, list[ToolCall]] = {}
    for call in calls:
        by_turn.setdefault(call.turn, []).append(call)
    for turn in shown:
        if until is not None and turn.index >= until:
            break
        message = {"role": "assistant", "content": agent_history.written(turn) or None}
        if turn.refused:
            out += [{**message, "content": message["content"] or ""},
                    turn_bounds.refused_message(turn, spec)]
            continue
        if turn_bounds.said_nothing(turn):
            # Endpoints refuse an assistant message with no content and no tool calls.
            out += [{**message, "content": ""}, {"role": "user", "content": SAID_NOTHING}]
            continue
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": c.get("id"), "type": "function",
                 "function": {"name": c.get("name"),
                              "arguments": arguments_text(sensitive.opened(c.get("arguments")))}}
                for c in turn.tool_calls]
        out.append(message)
        for call in by_turn.get(turn.index, []):
            out.append({"role": "tool", "tool_call_id": call.call_id,
                        "content": tool_message(call)})
    return out


def arguments_text(arguments) -> str:
    """A call's arguments as the conversation carries them: JSON text, as endpoints accept
    only (a model may have sent an object, kept as sent on its turn)."""
    if arguments is None or arguments == "":
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)


# What the model is told after an answer with neither text nor a tool call.
SAID_NOTHING = ("Your last answer was empty: it had neither text nor a tool call, and was "
                "not taken as your final answer. Answer with text, or call a tool.")


def tool_message(call: ToolCall) -> str:
    """What the model is told about one settled call."""
    if call.status in (S.SUCCEEDED, S.COMPENSATING, S.COMPENSATED, S.COMPENSATION_FAILED):
        told = tool_results.told(call.result) if call.result is not None else {"ok": True}
        if call.status == S.COMPENSATED:
            # A person undid it and the agent goes on: the model must not build on it.
            told = {"undone": "a person undid this call's effect; it no longer stands",
                    "result_before_the_undo": told}
        return json.dumps(told)
    if call.status == S.INVALID:
        return json.dumps({"error": f"invalid call, not executed: {call.error_message}"})
    if call.status == S.CANCELLED:
        return json.dumps({"error": f"a person cancelled this call; it was not executed: "
                                    f"{call.error_message}"})
    if call.status == S.DECLINED:
        return json.dumps({"error": f"declined, not executed: {call.error_message}"})
    return json.dumps({"error": f"failed, nothing changed: {call.error_message}"})


# --- the model -----------------------------------------------------------------------------

def model_client() -> "openai.OpenAI":
    # Imported when a model is asked, not at every process's start (model_call_errors).
    import openai

    # Retries are the runtime's business (max_retries=0), as for the demo's model client.
    return openai.OpenAI(base_url=settings.MODEL_BASE_URL, api_key=settings.MODEL_API_KEY,
                         timeout=settings.EXTERNAL_TIMEOUT_SECONDS, max_retries=0)


def ask_for_summary(client: "openai.OpenAI", spec: definition.AgentSpec, cut: int,
                    older: list[dict], transcript: dict) -> calls_tx.ModelTurn:
    """The model's summary of `older` (the conversation before turn `cut`), as a turn that
    stands for those turns from now on and keeps the reference of their `transcript`.
    Raises as ask_model does."""
    turn = ask_model(client, spec, agent_history.summary_request(older), tools=False)
    # What the model sent is made storable where the turn is stored
    # (turns_tx.storable_turn); here only whether it wrote anything.
    if not str(turn.content or "").strip():
        # Asking again is no cure for a model that answers nothing: a person looks.
        raise ModelFormatError("the model answered the summary request with no text",
                               output=kept_answer(dataclasses.asdict(turn)))
    return dataclasses.replace(turn, tool_calls=[], summarises=cut, transcript=transcript)


def ask_model(client: "openai.OpenAI", spec: definition.AgentSpec, conversation: list[dict], *,
              tools: bool = True) -> calls_tx.ModelTurn:
    """One chat completion, with the step's tools unless `tools` is False. Raises
    TransientError or PermanentError (the endpoint's failures), or ModelFormatError (an
    answer that is no chat completion)."""
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionMessage

    offered = {"tools": spec.openai_tools()} if tools else {}
    try:
        completion = client.chat.completions.create(
            model=spec.model or settings.MODEL_NAME, messages=conversation, **offered)
    except model_call_errors() as exc:
        raise model_call_error(exc) from exc
    except (json.JSONDecodeError, openai.APIResponseValidationError) as exc:  # no JSON body
        raise ModelFormatError(f"the model endpoint answered with no chat completion: "
                               f"{exc}", output=None) from exc
    # The client builds the answer without validating it: its shape is checked here, or a
    # page from a proxy would fail as an AttributeError, unclassified.
    choices = getattr(completion, "choices", None) if isinstance(completion, ChatCompletion) \
        else None
    message = getattr(choices[0], "message", None) if isinstance(choices, list) and choices \
        else None
    if not isinstance(message, ChatCompletionMessage):
        raise ModelFormatError(
            "the model endpoint answered with no chat completion (no choice with a message): "
            f"{type(completion).__name__}", output=kept_answer(completion))
    choice = choices[0]
    asked = [{"id": getattr(c, "id", None), "name": getattr(c.function, "name", None),
              "arguments": getattr(c.function, "arguments", None)}
             if getattr(c, "function", None) is not None else
             # Kept as the call it is not (it names no tool): the model is told, not ignored.
             {"id": getattr(c, "id", None), "name": "", "arguments": None}
             for c in (message.tool_calls if isinstance(message.tool_calls, list) else [])]
    usage = completion.usage
    return calls_tx.ModelTurn(
        content=message.content or "", tool_calls=asked,
        finish_reason=choice.finish_reason or "", model_ref=completion.id or "",
        prompt_tokens=getattr(usage, "prompt_tokens", 0) if usage else 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) if usage else 0)


# The most of a malformed answer kept for diagnosis: the one bound of every rejected output
# (transitions.Outcome keeps no more of any), cut here already where it is no JSON.
KEPT_ANSWER_MAX = transitions.INVALID_OUTPUT_MAX


def kept_answer(answer) -> object:
    """What the endpoint answered, as it is kept for diagnosis: its JSON form where it has
    one and it is small, else its text, cut."""
    try:
        kept = answer.to_dict(warnings=False) if hasattr(answer, "to_dict") else answer
        if len(json.dumps(kept, default=str)) <= KEPT_ANSWER_MAX:
            return kept
    except Exception:  # an answer built without validation may not dump: its text then
        pass
    try:
        text = answer if isinstance(answer, str) else repr(answer)
    except Exception as exc:
        text = f"(unreadable {type(answer).__name__}: {type(exc).__name__})"
    return printable(text[:KEPT_ANSWER_MAX])
