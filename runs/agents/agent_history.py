"""An agent's conversation kept within its context budget.

Every model turn is sent the conversation so far, so a long one grows with each turn until
the model refuses it (or costs more than it is worth). An agent declares `context_budget`
(estimated tokens) and `keep_turns`: when the conversation about to be sent passes the
budget, the turns before the last `keep_turns` are summarised by a model call, and that
summary is itself a stored turn (AgentTurn.summarises: the index of the first turn it does
not cover). Like any turn it is stored before anything goes on and reused on replay: the
model is never asked for the same summary twice. Later turns are sent the summary in place
of the turns it covers; those turns (and their tool calls) stay stored in full, as rows, on
the run page and in the API, and the summary turn keeps the reference of an artifact holding
their transcript (runs.machine.artifacts), downloadable from the run page. A later summary
covers the earlier one too (it is sent as part of the conversation it summarises), so only
the newest summary is ever sent. A summary is a model call: it counts against the agent's
turn and token budgets like any turn.

The transcript is written before the model is asked for the summary, and named by its
content: the summary turn is stored with its reference, so no summary turn lacks it, and a
crash or a failed request before the turn is stored writes the same transcript again under
the same name, not a second one. A replay reuses the stored turn and writes nothing.

Sizes are estimated as characters / 4 of the messages as JSON: the same every time for the
same stored turns, so a replay makes the same decision.
"""

import json
from datetime import datetime

from audit.redaction import redact

from ..agent_models import AgentTurn, ToolCall
from ..machine import artifacts, sensitive
from ..models import Step

# A crash point after a summary turn was stored ("after_summary:<step>"), for the drills,
# and one after the summary was asked (its transcript written), before the turn is stored.
AFTER_SUMMARY = "after_summary"
BEFORE_SUMMARY = "before_summary"

SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation below for the assistant that continues it. Keep every fact "
    "a later turn needs: what each tool call returned (identifiers, amounts, references), "
    "what failed or was declined and why, and what is left to do. Answer with the summary "
    "only.")
# Precedes the conversation to summarise (its messages as one JSON array) in the request.
TRANSCRIPT_HEADING = "Conversation to summarise (JSON, one message per element):"
SUMMARY_HEADING = "Summary of the conversation's turns {first}-{last} (kept in full on the " \
                  "run page):"


def estimated_tokens(messages: list[dict]) -> int:
    return len(json.dumps(messages, sort_keys=True, separators=(",", ":"))) // 4


def newest_summary(turns: list[AgentTurn]) -> AgentTurn | None:
    return next((t for t in reversed(turns) if t.summarises), None)


def visible(turns: list[AgentTurn]) -> tuple[AgentTurn | None, list[AgentTurn]]:
    """(the newest summary or None, the ordinary turns it does not cover, in order): what
    the model is sent of the stored turns."""
    summary = newest_summary(turns)
    start = summary.summarises if summary else 0
    return summary, [t for t in turns if not t.summarises and t.index >= start]


def summary_message(summary: AgentTurn) -> dict:
    heading = SUMMARY_HEADING.format(first=0, last=summary.summarises - 1)
    return {"role": "user", "content": f"{heading}\n{written(summary)}"}


def written(turn: AgentTurn) -> str:
    """The turn's text as the model wrote it, for the model alone: where the stored content
    masks part of it, the sealed text opened (as a sensitive value is, to tell the model)."""
    return sensitive.decrypt(turn.sealed_content) if turn.sealed_content else turn.content


def summary_cut(context_budget: int, keep_turns: int, conversation: list[dict],
                turns: list[AgentTurn]) -> int | None:
    """Where a summary is due before the next turn: the index of the first turn it leaves
    out (the summary covers every turn before it), or None when the conversation is within
    the budget, or when there is nothing but the last `keep_turns` turns to summarise."""
    if not context_budget or estimated_tokens(conversation) <= context_budget:
        return None
    _, shown = visible(turns)
    if len(shown) <= keep_turns:
        return None
    return shown[-keep_turns].index if keep_turns else shown[-1].index + 1


def summary_request(older: list[dict]) -> list[dict]:
    """The messages of the request for a summary of `older` (the conversation up to the
    cut, an earlier summary included). The conversation goes as text (JSON), not as chat
    messages: its tool calls are facts to read, not calls to answer."""
    return [{"role": "system", "content": SUMMARY_INSTRUCTIONS},
            {"role": "user", "content": f"{TRANSCRIPT_HEADING}\n"
                                        f"{json.dumps(older, sort_keys=True)}"}]


# A transcript's layout, named in it, so that a reader can tell a later one.
TRANSCRIPT_FORMAT = 1
TURN_FIELDS = ("index", "summarises", "content", "tool_calls", "finish_reason", "model_ref",
               "prompt_tokens", "completion_tokens", "created_at")
CALL_FIELDS = ("call_id", "tool", "kind", "impact", "status", "arguments", "args_hash",
               "result", "error_class", "error_message", "idempotency_key", "compensation_key",
               "attempt", "approved_by", "approved_hash", "remote_ref", "compensation_ref",
               "started_at", "finished_at")
# What the model or a tool wrote: anything in it that looks like a credential is masked, as
# the run page masks it (whoever may see the run may download the transcript).
WRITTEN = frozenset({"content", "tool_calls", "arguments", "result", "error_message"})


def transcript(step: Step, turns: list[AgentTurn], calls: list[ToolCall], cut: int) -> dict:
    """The turns before `cut` in full, in order: each turn's content and the tool calls it
    asked for, with each call's row (arguments, result, state, key, evidence, error). Values
    are as stored: the fields a tool declares sensitive stay sealed, never opened. Read from
    the stored rows only, so the same turns give the same transcript every time."""
    by_turn: dict[int, list[ToolCall]] = {}
    for call in calls:
        by_turn.setdefault(call.turn, []).append(call)
    return {"format": TRANSCRIPT_FORMAT, "run": step.run_id, "step": step.name,
            "generation": step.generation, "covers": f"0-{cut - 1}",
            "turns": [{**stored_fields(turn, TURN_FIELDS),
                       "calls": [{"ref": c.ref, **stored_fields(c, CALL_FIELDS)}
                                 for c in by_turn.get(turn.index, [])]}
                      for turn in turns if turn.index < cut]}


def stored_fields(row, names: tuple[str, ...]) -> dict:
    out = {}
    for name in names:
        value = getattr(row, name)
        if isinstance(value, datetime):
            value = value.isoformat()
        out[name] = redact(value, keep=sensitive.is_sealed) if name in WRITTEN else value
    return out


def keep_transcript(step: Step, turns: list[AgentTurn], calls: list[ToolCall],
                    cut: int) -> dict:
    """The transcript of the turns before `cut`, written as an artifact (once: it is named
    by its content); its reference, for the summary turn."""
    return artifacts.write(step.run_id, f"{step.name}-transcript",
                           transcript(step, turns, calls, cut))
