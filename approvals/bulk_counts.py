"""What a bulk action's preview counts, before any job starts (approvals.bulk.bulk_preview):
the runs a filter matches, those the person may act on, and of those the ones whose state
accepts the action by the rule its transition refuses by (operator_rules.state_accepts), so
that the preview's count is the runs the job will not refuse for their state. The runs the
table would let the action start from but that were ended while an effect was unsettled
(operator_rules.held_to_settle: they wait only for it to be settled) are counted and the
first of them named, since the job refuses each of them."""

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from runs.machine.transitions.operator_rules import (
    held_to_settle_filter,
    state_accepts,
    table_accepts,
)

# Of the runs held until their effects are settled, how many a preview names.
HELD_NAMED = 20


@dataclass(frozen=True)
class Preview:
    """What a bulk action would touch: the runs the filter matches (that the person may
    see), how many of them the person may take the action on, how many of those the
    action's transition accepts in their present state, and how many of them it refuses
    only because they were ended with an effect unsettled (the first HELD_NAMED named by
    id)."""

    matching: int
    may_act: int
    acceptable: int
    held_to_settle: int = 0
    held_named: tuple[int, ...] = ()


def count_preview(runs: QuerySet, action: str, may: Q) -> Preview:
    """The preview of `action` over `runs` (the runs the person may see that the filter
    matches), `may` those they may take it on: one query, and one more to name the runs
    held until their effects are settled where there are any."""
    accepts = state_accepts(action)
    held = may & table_accepts(action) & held_to_settle_filter(action)
    counts = runs.aggregate(matching=Count("pk"), may_act=Count("pk", filter=may),
                            acceptable=Count("pk", filter=may & accepts),
                            held_to_settle=Count("pk", filter=held))
    named = ()
    if counts["held_to_settle"]:
        named = tuple(runs.filter(held).order_by("pk").values_list("pk", flat=True)
                      [:HELD_NAMED])
    return Preview(**counts, held_named=named)
