"""The lease holder settles a step's unknown outcome: the step's effect looked up by its key
and settled by the effect machine's one rule (effects.settle), the same a tool call's
unknown outcome goes through."""

from datetime import datetime

from ...models import Step
from . import effects
from .clashes import written_again_on_clash
from .kernel import (  # the package's shared vocabulary
    Lease,
)
from .lease_cycle import advance, holding


def settle_unknown(lease: Lease, step: Step, verdict, *, error: str = "",
                   now: datetime | None = None) -> Lease:
    """Settle the lease holder's unknown step with what reconciliation found
    (effects.settle); a step found done lets the run go on to its next step. Rolled back by
    the database for a clash with another session, it is written again (clashes)."""
    return written_again_on_clash(
        lease, step, f"the lookup's verdict on step {step.name}",
        lambda step: settle_unknown_once(lease, step, verdict, error, now))


def settle_unknown_once(lease: Lease, step: Step, verdict, error: str,
                    now: datetime | None) -> Lease:
    with holding(lease, "settle_unknown", now) as change:
        if change is not None and effects.settle(change, lease, effects.StepEffect(lease, step),
                                                 verdict, error=error):
            advance(change, lease)
    return lease
