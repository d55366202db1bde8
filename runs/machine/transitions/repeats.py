"""A tool call a person settled as "not done" (reconcile_tool_call with NotFound) may yet
land: a slow request of it can reach its receiver after the person looked. So the call keeps
its key open for the model's repeat of it (ToolCall.key_open_for_repeat):

- a repeat with the same tool and arguments is the same action: it is sent under the settled
  call's key (and so its undo's), and a receiver that honours keys does it once
  (repeats_take_open_keys, when the model's turn is stored);
- a call of the same tool with other arguments, while that key is open, is another action
  that would stand beside the earlier one should it land: it waits for a person's approval
  before it is sent, the request naming the earlier call (earlier_call_may_land, asked by
  effect_rows.CallEffect and the approval's snapshot)."""

from ...agent_models import ToolCall, ToolCallStatus
from ...models import Step
from ..keys import tool_compensation_key


def _open_calls(step_id: int, generation: int, tools):
    # The conversation's calls settled as not done whose key no repeat has taken, oldest
    # first.
    return ToolCall.objects.filter(
        step_id=step_id, generation=generation, status=ToolCallStatus.FAILED,
        key_open_for_repeat=True, tool__in=tools).order_by("turn", "index")


def repeats_take_open_keys(step: Step, rows: list[ToolCall]) -> dict[str, str]:
    """Give each new call (pending) that repeats an open call with the same tool and
    arguments that call's key and undo key, the earliest such call first, each key taken
    once. Returns {new call: the call whose key it took}."""
    repeats = [row for row in rows if row.status == ToolCallStatus.PENDING]
    if not repeats:
        return {}
    open_calls = list(_open_calls(step.pk, step.generation, {row.tool for row in repeats}))
    taken = {}
    for row in repeats:
        earlier = next((c for c in open_calls if (c.tool, c.args_hash) == (row.tool,
                                                                         row.args_hash)), None)
        if earlier is None:
            continue
        open_calls.remove(earlier)
        row.idempotency_key = earlier.idempotency_key
        if row.compensation_key:
            row.compensation_key = tool_compensation_key(earlier.idempotency_key)
        earlier.key_open_for_repeat = False
        earlier.save(update_fields=["key_open_for_repeat"])
        taken[row.ref] = earlier.ref
    return taken


def earlier_call_may_land(call: ToolCall) -> ToolCall | None:
    """The earliest call of `call`'s tool in its conversation that a person settled as not
    done and whose key is still open, when `call` is another action than it (not under its
    key): sent unattended, both could stand. None otherwise."""
    if call.status == ToolCallStatus.FAILED:
        return None
    return (_open_calls(call.step_id, call.generation, [call.tool])
            .exclude(pk=call.pk).exclude(idempotency_key=call.idempotency_key).first())


def repeat_warning(earlier: ToolCall) -> str:
    """What a person approving a call is told of `earlier` (earlier_call_may_land)."""
    return (f"tool call {earlier.ref} of {earlier.tool} was settled as not done by a person, "
            f"but its request may still land; these arguments differ from its, so both "
            f"could stand")
