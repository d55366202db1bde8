"""What the console shows of an agent step: its conversation, turn by turn, each tool call
with its arguments (redacted where the tool declares it), state, key, remote reference,
last error and the tokens of the turn. Two queries whatever the number of turns and calls.
The integration API (GET /api/runs/{id}) reads the same conversations.

Arguments are shown through shown_arguments with the tool's declaration; a call whose tool
is no longer declared (its workflow version is gone) has no declaration to honour, so its
arguments are not shown at all rather than shown unmasked."""

from dataclasses import dataclass, field

from . import definition as d
from .agent_models import AgentTurn, ToolCall
from .models import Step
from .redaction import REDACTED
from .transitions.agent_calls import shown_arguments
from .transitions.tool_call_rules import TOOL_CALL_ACTIONS, call_refusal


@dataclass
class Turn:
    index: int
    content: str
    tokens: int
    model_ref: str
    calls: list[dict] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # A summary turn: it stands for the turns before this index (runs.agent_history).
    summarises: int = 0

    @property
    def summary_of(self) -> str:
        return f"0-{self.summarises - 1}" if self.summarises else ""


@dataclass
class Conversation:
    step: str
    turns: list[Turn]

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.turns)

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def completion_tokens(self) -> int:
        return sum(t.completion_tokens for t in self.turns)

    @property
    def tool_calls(self) -> int:
        return sum(len(t.calls) for t in self.turns)


def conversations(run, steps: list[Step]) -> list[Conversation]:
    """The conversation of each agent step of `run` (empty for a run without one)."""
    agents = [s for s in steps if s.kind == d.AGENT]
    if not agents:
        return []
    workflow = d.registry.get(run.workflow_name, run.workflow_version)
    names = {s.pk: s.name for s in agents}
    by_pk = {s.pk: s for s in agents}
    turns: dict[int, dict[int, Turn]] = {pk: {} for pk in names}
    for t in AgentTurn.objects.filter(step_id__in=list(names)).order_by("step_id", "index"):
        turns[t.step_id][t.index] = Turn(t.index, t.content, t.tokens, t.model_ref,
                                          prompt_tokens=t.prompt_tokens,
                                          completion_tokens=t.completion_tokens,
                                          summarises=t.summarises)
    newest = {pk: max(turns[pk], default=0) for pk in names}
    for c in ToolCall.objects.filter(step_id__in=list(names)).order_by("step_id", "turn",
                                                                       "index"):
        tool = None
        if workflow is not None:
            spec = workflow.step(names[c.step_id])
            tool = spec.tools.get(c.tool) if isinstance(spec, d.AgentSpec) else None
        turn = turns[c.step_id].setdefault(c.turn, Turn(c.turn, "", 0, ""))
        turn.calls.append({
            "ref": c.ref, "tool": c.tool, "kind": c.kind, "impact": c.impact,
            "status": c.status, "arguments": (shown_arguments(tool, c.arguments) if tool is not None
                          else REDACTED),
            "args_hash": c.args_hash, "key": c.idempotency_key, "attempt": c.attempt,
            "remote_ref": c.remote_ref, "compensation_ref": c.compensation_ref,
            "error_class": c.error_class, "error": c.error_message,
            "approved_by": c.approved_by, "step": names[c.step_id],
            "slug": f"{names[c.step_id]}-{c.turn}-{c.index}",
            # The operator actions this call's state allows (who may use them is the
            # page's business), read from the rows in hand.
            "ops": [a for a in TOOL_CALL_ACTIONS
                    if call_refusal(a, run, by_pk[c.step_id], c, tool,
                                    last_turn=newest[c.step_id]) is None]})
    return [Conversation(names[pk], list(turns[pk].values())) for pk in names]
