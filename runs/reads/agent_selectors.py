"""What the console shows of an agent step: its conversation, turn by turn, each tool call
with its arguments (redacted where the tool declares it), state, key, remote reference,
last error and the tokens of the turn, and its result (masked as the arguments are). Three
queries whatever the number of turns and calls; a long conversation is read a page of
turns at a time (`first_turn`, `turns`). The integration API (GET /api/runs/{id}) reads the
same conversations.

Arguments and results are shown through sensitive.shown with the tool's declaration: a
sealed value as the mask, never its ciphertext; a call whose tool is no longer declared (its
workflow version is gone) has no declaration to honour, so its arguments are not shown at
all rather than shown unmasked."""

from dataclasses import dataclass, field

from django.db.models import Count, Max

from ..agent_models import AgentTurn, ToolCall, ToolCallStatus
from ..definitions import definition
from ..machine.endings import wait_over
from ..machine.sensitive import shown
from ..machine.transitions.operator_rules import paused_undo
from ..machine.transitions.tool_call_rules import TOOL_CALL_ACTIONS, call_refusal
from ..models import Run, Step


@dataclass
class Turn:
    index: int
    content: str
    tokens: int
    model_ref: str
    calls: list[dict] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # A summary turn: it stands for the turns before this index (runs.agents.agent_history),
    # and `transcript` is the reference of the artifact holding those turns in full.
    summarises: int = 0
    transcript: dict | None = None
    id: int = 0
    # Why none of the tool calls the turn asked for was made (too many for one turn).
    refused: str = ""

    @property
    def summary_of(self) -> str:
        return f"0-{self.summarises - 1}" if self.summarises else ""


@dataclass
class Conversation:
    step: str
    turns: list[Turn]
    # The agent's instructions, as the model received them first (its definition's).
    system_prompt: str = ""
    # Paging: the turns shown are first_turn .. first_turn + len(turns) - 1 of turn_count.
    first_turn: int = 0
    turn_count: int = 0
    page_size: int = 0
    # The step's attempt generation this conversation belongs to: a re-run from a chosen
    # step (runs.machine.transitions.rerun) starts a new one, and the earlier ones are history.
    generation: int = 0
    current: bool = True

    @property
    def last_shown(self) -> int:
        return self.turns[-1].index if self.turns else self.first_turn

    @property
    def earlier(self) -> int | None:
        """The first turn of the page before this one, None on the first page."""
        return max(self.first_turn - self.page_size, 0) if self.first_turn > 0 else None

    @property
    def later(self) -> int | None:
        """The first turn of the page after this one, None on the last page."""
        following = self.first_turn + self.page_size
        return following if self.page_size and following < self.turn_count else None

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


# Turns per page of a conversation on the run page.
TURN_PAGE = 50


def declared_tool(call: ToolCall):
    """The tool `call` asked for, as its run's workflow version declares it; None when that
    version, its agent step or the tool is no longer registered. Two queries (the call's step
    and run) unless they are loaded."""
    run = call.step.run
    spec = definition.step_of(definition.registry.get(run.workflow_name, run.workflow_version),
                              call.step.name)
    return spec.tools.get(call.tool) if isinstance(spec, definition.AgentSpec) else None


def conversations(run, steps: list[Step], *, first_turn: int = 0,
                  turns: int | None = None) -> list[Conversation]:
    """The conversation of each agent step of `run` (empty for a run without one): with
    `turns`, the page of that many turns from `first_turn` on, each with its calls. A step
    re-run as a new generation has one conversation per generation that stored a turn,
    the current one first (offered the call actions), then the earlier ones, newest first."""
    agents = [s for s in steps if s.kind == definition.AGENT]
    if not agents:
        return []
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    names = {s.pk: s.name for s in agents}
    by_pk = {s.pk: s for s in agents}
    window = {} if turns is None else {"index__gte": first_turn,
                                       "index__lt": first_turn + turns}
    call_window = {} if turns is None else {"turn__gte": first_turn,
                                            "turn__lt": first_turn + turns}
    # How many turns each generation of each step has, and its newest (what the call
    # actions need), in one.
    extent = {(row["step_id"], row["generation"]): row for row in AgentTurn.objects.filter(
        step_id__in=list(names)).values("step_id", "generation").annotate(
        n=Count("*"), newest=Max("index")).order_by()}
    current = {pk: by_pk[pk].generation for pk in names}
    by_step: dict[tuple[int, int], dict[int, Turn]] = {
        (pk, current[pk]): {} for pk in names}
    for t in AgentTurn.objects.filter(step_id__in=list(names), **window).order_by(
            "step_id", "generation", "index"):
        by_step.setdefault((t.step_id, t.generation), {})[t.index] = Turn(
            t.index, t.content, t.tokens, t.model_ref, prompt_tokens=t.prompt_tokens,
            completion_tokens=t.completion_tokens, summarises=t.summarises,
            transcript=t.transcript, id=t.pk, refused=t.refused)
    newest = {pk: (extent[pk, current[pk]]["newest"] if (pk, current[pk]) in extent else 0)
              for pk in names}
    # A compensation paused at the undo of one call: confirmed on that call (one more query,
    # only for a run paused there).
    paused = paused_undo(run, steps, workflow)
    paused_call = paused.call.pk if paused is not None and paused.call is not None else None
    for c in ToolCall.objects.filter(step_id__in=list(names), **call_window).order_by(
            "step_id", "generation", "turn", "index"):
        spec = definition.step_of(workflow, names[c.step_id])
        tool = spec.tools.get(c.tool) if isinstance(spec, definition.AgentSpec) else None
        turn = by_step.setdefault((c.step_id, c.generation), {}).setdefault(
            c.turn, Turn(c.turn, "", 0, ""))
        turn.calls.append({
            "ref": c.ref, "tool": c.tool, "kind": c.kind, "impact": c.impact,
            "status": c.status, "arguments": shown(tool, c.arguments),
            # What the tool returned, masked as its arguments are.
            "result": None if c.result is None else shown(tool, c.result),
            "args_hash": c.args_hash, "key": c.idempotency_key, "attempt": c.attempt,
            "remote_ref": c.remote_ref, "compensation_ref": c.compensation_ref,
            "compensation_key": c.compensation_key,
            "error_class": c.error_class, "error": c.error_message,
            "approved_by": c.approved_by, "step": names[c.step_id], "wait_ended": None,
            "slug": f"{names[c.step_id]}-{c.turn}-{c.index}" + (
                f"-g{c.generation}" if c.generation != current[c.step_id] else ""),
            # The operator actions this call's state allows (who may use them is the
            # page's business), read from the rows in hand.
            "ops": [a for a in TOOL_CALL_ACTIONS
                    if call_refusal(a, run, by_pk[c.step_id], c, tool,
                                    last_turn=newest[c.step_id]) is None]
            + (["confirm_compensation"] if c.pk == paused_call else [])})
    # A call still `waiting` whose wait the run's end ended keeps that status, as a step's
    # wait does (kernel.end_waits): it says the wait is over, as the step does (one query,
    # only for such a call of a run a person ended).
    waiting = [c for turns_of in by_step.values() for turn in turns_of.values()
               for c in turn.calls if c["status"] == ToolCallStatus.WAITING]
    over = wait_over(run) if waiting else None
    for c in waiting:
        c["wait_ended"] = over
    result = []
    for pk in names:
        spec = _agent_spec(workflow, names[pk])
        generations = sorted({g for step_pk, g in [*by_step, *extent] if step_pk == pk},
                             key=lambda g: (g != current[pk], -g))
        result += [Conversation(
            names[pk], sorted(by_step.get((pk, g), {}).values(), key=lambda t: t.index),
            system_prompt=spec.system_prompt if spec is not None else "",
            first_turn=first_turn if turns is not None else 0,
            turn_count=extent[pk, g]["n"] if (pk, g) in extent else 0, page_size=turns or 0,
            generation=g, current=g == current[pk]) for g in generations]
    return result


def _agent_spec(workflow: definition.Workflow | None, name: str) -> definition.AgentSpec | None:
    spec = definition.step_of(workflow, name)
    return spec if isinstance(spec, definition.AgentSpec) else None


def turn_with_artifact(run_id: int, turn_id: int) -> tuple[Run, AgentTurn] | None:
    """A turn of the run that keeps an artifact: a summary turn's transcript, or a final
    answer longer than RUNS_AGENT_TEXT_MAX_CHARS kept whole (runs.agents.turn_bounds); with
    its run (whose workflow the reader's permission is checked on), or None."""
    turn = (AgentTurn.objects.select_related("step__run")
            .filter(pk=turn_id, step__run_id=run_id, transcript__isnull=False).first())
    return None if turn is None else (turn.step.run, turn)
