"""An agent's conversation kept within its context budget.

Every model turn is sent the conversation so far, so a long one grows with each turn until
the model refuses it (or costs more than it is worth). An agent declares `context_budget`
(estimated tokens) and `keep_turns`: when the conversation about to be sent passes the
budget, the turns before the last `keep_turns` are summarised by a model call, and that
summary is itself a stored turn (AgentTurn.summarises: the index of the first turn it does
not cover). Like any turn it is stored before anything goes on and reused on replay: the
model is never asked for the same summary twice. Later turns are sent the summary in place
of the turns it covers; those turns (and their tool calls) stay stored in full, as rows, on
the run page and in the API. A later summary covers the earlier one too (it is sent as part
of the conversation it summarises), so only the newest summary is ever sent. A summary is
a model call: it counts against the agent's turn and token budgets like any turn.

Sizes are estimated as characters / 4 of the messages as JSON: the same every time for the
same stored turns, so a replay makes the same decision.
"""

import json

from ..agent_models import AgentTurn

# A crash point after a summary turn was stored ("after_summary:<step>"), for the drills.
AFTER_SUMMARY = "after_summary"

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
    return {"role": "user", "content": f"{heading}\n{summary.content}"}


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
