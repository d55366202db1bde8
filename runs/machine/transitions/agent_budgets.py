"""The budgets of an agent step, read by the lease holder before each model turn and after
each is stored (agent_turns): its turns, tool calls and tokens, and its schema error budget.
Which budget is spent, never a change: stopping the run is agent_turns' transition."""

from ...agent_models import AgentTurn, ToolCall
from ...definitions import definition
from ...models import AttentionReason, Step
from .agent_calls import S


def turn_stops(step: Step, spec: definition.AgentSpec, invented: list[str]) -> tuple[str,
                                                                                      str] | None:
    """Why the turn just stored stops the run for a person, or None."""
    if invented:
        return (AttentionReason.MODEL_OUTPUT_PAUSED,
                f"the model asked for {', '.join(repr(n) for n in invented)}, which the step "
                f"does not declare (it declares {', '.join(spec.tools)})")
    turns, invalid_calls = turns_in_budget(step)
    invalid = invalid_calls.count()
    # A turn refused for asking too many calls is a schema error too: a model repeating it
    # is stopped by the same budget, never asked again and again.
    refused = list(turns.exclude(refused="").values_list("refused", flat=True))
    if invalid + len(refused) > spec.schema_error_budget:
        newest = turns.order_by("index").last()
        last = newest.refused if newest is not None and newest.refused else \
            invalid_calls.order_by("turn", "index").last().error_message \
            if invalid else refused[-1]
        said = [f"{invalid} tool calls had arguments that fail their schema"] if invalid else []
        if refused:
            said.append(f"{len(refused)} turns asked for more tool calls than one turn may")
        return (AttentionReason.MODEL_OUTPUT_PAUSED,
                f"{' and '.join(said)} (budget {spec.schema_error_budget}); the last: {last}")
    return budget_spent(step, spec)


def turns_in_budget(step: Step):
    """The agent step's turns, and its tool calls whose arguments failed their schema, that
    count against its schema error budget: those since a person's retry or resume started a
    fresh budget (budget_started_at, set again at the next claim), as a decision step's
    format failures start again. Counted over the whole generation, a model that answered
    well after the person's retry was stopped again for the errors before it."""
    turns = AgentTurn.objects.filter(step=step, generation=step.generation)
    invalid = ToolCall.objects.filter(step=step, generation=step.generation, status=S.INVALID)
    if step.budget_started_at is not None:
        turns = turns.filter(created_at__gte=step.budget_started_at)
        first = turns.order_by("index").values_list("index", flat=True).first()
        invalid = invalid.filter(turn__gte=first) if first is not None else invalid.none()
    return turns, invalid


def budget_spent(step: Step, spec: definition.AgentSpec, *, asking: bool = False
                 ) -> tuple[str, str] | None:
    """Which of the agent's budgets is spent, or None. `asking`: before another turn."""
    budget = spec.budget
    # A re-run's new generation has the whole budget again, as its step's attempts do.
    turns = list(AgentTurn.objects.filter(step=step, generation=step.generation)
                 .values_list("prompt_tokens", "completion_tokens"))
    # A call a person cancelled was never made: cancelling the calls past the budget lets
    # the agent go on (past_call_budget says so), the model told they were cancelled.
    calls = ToolCall.objects.filter(step=step, generation=step.generation).exclude(
        status=S.CANCELLED).count()
    tokens = sum(p + c for p, c in turns)
    why = None
    if calls > budget.max_tool_calls:
        why = f"tool call budget spent: the model asked for {calls} calls, at most " \
              f"{budget.max_tool_calls}"
    elif tokens > budget.max_tokens:
        why = f"token budget spent: {tokens} tokens used, at most {budget.max_tokens}"
    elif asking and len(turns) >= budget.max_turns:
        why = f"turn budget spent: {len(turns)} model turns without a final answer, at " \
              f"most {budget.max_turns}"
    return (AttentionReason.BUDGET_EXHAUSTED, why) if why else None
