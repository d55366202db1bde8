"""An approval step's rule: whether a person is asked at all.

A step declared with `approve_if` (Workflow.approval) is judged by the worker that reaches
it, inside the lease's change (lease_cycle.advance): its function is called on the lease's
rows as a step's is (it builds from earlier results and calls nothing), its snapshot made
and masked as the approvals app makes it for a request (runs.machine.approval_snapshots),
and approve_if asked with it. False: the step succeeds through the one effect machine's
success (effects.succeed, as a sleep's does), with a record of its own (approved_by_rule)
that names no person, and the run goes on in the same commit; no request is made, nobody is
notified. Anything else leaves the step to a person, as a step without a rule: True, or a
rule that cannot be read (it raises, or answers neither True nor False), or a snapshot that
cannot be made (a sealed value no key in the ring opens: the approvals sweep then holds the
run for the key as it does for any approval step). A rule is never what lets a step through
unasked by mistake.
"""

import copy
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from audit import redaction
from audit.actions import AuditAction

from ...definitions import definition
from ...models import Step, StepStatus
from ..approval_snapshots import (
    SnapshotUnavailable,
    approval_snapshot,
    as_shown,
    database_failure,
)
from ..context import StepContext, build_context
from ..rule_answers import person_asked
from ..step_rows import index_of
from . import effects
from .approval_waits import approved_reference
from .kernel import Change, Lease

logger = logging.getLogger(__name__)

# Who approved a step no person was asked about, as its result and its reference say.
BY_RULE = "the workflow's rule"
# What is said of such a step where a person reads the run (rule_approval_words).
APPROVED_UNASKED = approved_reference(BY_RULE) + "; no person was asked"


def approved_by_rule(change: Change, lease: Lease, step: Step) -> bool:
    """Whether the workflow's rule approved approval step `step`, which the run reaches in
    `change`: it has then succeeded, its result shaped as a person's approval leaves it
    (approved, by, comment) and saying that no person was asked, and the caller goes on.
    False: a person decides, as for a step that declares no rule.

    The rule is asked only when the run first reaches the step. Once the step has waited for
    a person (it started: a rejection, a timeout or a request that could not be made, then
    resumed), a person decides it, whatever the rule would say now."""
    spec = lease.spec(step.name)
    if spec.approve_if is None or step.status != StepStatus.PENDING \
            or step.started_at is not None:
        return False
    # Once per reaching: a change tried and thrown away (the one statement left to the
    # locking path when the run then waits, a clash written again) asked it already, and a
    # rule whose answers differ may not take back the person its first answer asked for.
    reached = (step.name, step.generation)
    if reached not in lease.rule_answers:
        lease.rule_answers[reached] = _no_person_needed(lease, step, spec)
    judged = lease.rule_answers[reached]
    if judged is None:
        return False
    snapshot, digest = judged
    # The record keeps the snapshot as stored, masked_values_hmac included, not as shown
    # (as_shown): the field is the only thing in it that binds the masked values (which
    # account was paid), and payload_hash is taken over it, so the record can be checked
    # against the hash, and against a request's, only whole. Keyed with SECRET_KEY, it
    # tells a reader of the run's history nothing.
    effects.succeed(change, effects.StepEffect(lease, step, spec=spec),
                    {"approved": True, "by": BY_RULE, "comment": "", "person_asked": False},
                    approved_reference(BY_RULE), AuditAction.APPROVED_BY_RULE,
                    decided_by=BY_RULE, person_asked=False, payload_hash=digest,
                    snapshot=snapshot)
    return True


def rule_approval_words(step: Step | Mapping) -> str:
    """APPROVED_UNASKED for a step the workflow's rule approved, else "". Read from its
    reference, which names who approved (approved_reference), as a person's approval leaves
    it: no username holds the rule's name (a space, an apostrophe), and the reference is read
    with the step, where its result is loaded apart (a query a step on the run page).

    `step` is a step's row, or its columns as an archive file holds them: the run page, its
    archived page, show_run and run_history say it from the same reading."""
    if isinstance(step, Mapping):
        kind, status, reference = step.get("kind"), step.get("status"), step.get("remote_ref")
    else:
        kind, status, reference = step.kind, step.status, step.remote_ref
    unasked = (kind == definition.APPROVAL and status == StepStatus.SUCCEEDED
               and reference == approved_reference(BY_RULE))
    return APPROVED_UNASKED if unasked else ""


def record_approval_words(action: str) -> str:
    """APPROVED_UNASKED for the audit record a rule's approval leaves (a run's history
    names the step's outcome by its record, not its row), else ""."""
    return APPROVED_UNASKED if action == AuditAction.APPROVED_BY_RULE else ""


def _no_person_needed(lease: Lease, step: Step,
                      spec: definition.StepDef) -> tuple[dict, str] | None:
    """(snapshot, hash) when approve_if, asked with the snapshot a person would be shown,
    answers False; None when it answers True or cannot be read, or the snapshot cannot be
    made (each logged: the author's rule or step function is at fault, and a person asked
    where nobody had to be says nothing of why)."""
    where = f"run {lease.run.pk} step {step.name}"
    try:
        snapshot, digest = approval_snapshot(step.name, spec.fn, _in_the_lease(lease, step))
    except SnapshotUnavailable as exc:
        if (failure := database_failure(exc)) is not None:
            # The lease's transaction went with it: nothing of this change can be written.
            raise failure from exc
        logger.warning("%s: approve_if not asked, its snapshot cannot be made (%s); a "
                       "person decides", where, exc)
        return None
    # A copy: what the rule does to it changes nothing of what is recorded. As a person is
    # shown it, without the hash binding its masked values.
    if person_asked(spec.approve_if, copy.deepcopy(as_shown(snapshot)), where=where):
        return None
    return snapshot, digest


@contextmanager
def _in_the_lease(lease: Lease, step: Step) -> Iterator[StepContext]:
    # As the approvals app builds it (context.context_outside_executor), from the lease's
    # rows: the results of the steps before, the one this change completed among them.
    with redaction.values_masked():
        yield build_context(lease.run, lease.steps, step, definition=lease.definition,
                            services=None, validated_input=lease.validated_input,
                            rows=index_of(lease, lease.steps))
