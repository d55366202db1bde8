"""Bulk by filter: one operator action on every run a filter matches, as a durable
background job.

A job fixes its runs when it starts (those matching, up to the newest run id then), and is
worked through a batch at a time by whichever worker holds its lease (Celery task
approvals.bulk_job; the approvals sweep hands a job whose worker died to another). Each run
goes through the one function every caller uses (approvals.operator_actions.act): the
permission rule, the transition's refusals, one audit record per run. Runs that need a
second person are gathered and, at the end, go into one approval request that lists them;
once it is approved, the job runs again, on those runs (approvals.bulk_approved), on this
same path.

Never twice on a run: before acting, the job claims the run with an outcome row (unique per
job and run) in its own commit; a claim found without its outcome (the worker died between
the two) is settled from the run's audit trail, where every record the job writes carries
the job's mark in its reason: the transition writes its record in the commit of its change,
so a record proves the action happened, and its absence that it did not. A worker that
stalled past its lease and was replaced acts on no run after that (approvals.bulk_lease):
the claim it left is settled by its successor, never by both.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, OperationalError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from audit.models import AuditRecord
from audit.quoting import quoted
from audit.redaction import redact_text
from runs.definitions import definition
from runs.execution.database_outage import would_not_wait
from runs.machine import crashpoints
from runs.machine.errors import TransitionNotAllowed
from runs.machine.storable import person_text_problem, text_problem
from runs.operator.actions import ACTIONS
from runs.permissions import grant_for, grants_of
from runs.reads.selectors import RunFilters, filtered_workflow_names

from .bulk_approved import apply_one, ask_second_person, waiting_runs
from .bulk_counts import Preview, count_preview
from .bulk_input import (
    job_input,
    mark_problem,
    marked,
    settle_claim,
    settle_claims,
)
from .bulk_lease import LeaseLost, hand_over, hold, release, renew, take
from .bulk_sight import LostSight, job_runs, lost_sight, sight_at_start, visible_runs
from .models import BulkJob, BulkJobPhase, BulkJobStatus, BulkOutcome
from .operator_actions import ActionForbidden, ActionInputError, act
from .permissions import can_decide
from .timeouts import clock

logger = logging.getLogger(__name__)

BATCH = 200
Outcome = BulkOutcome.Outcome


class BulkRefused(ValueError):
    """A bulk job cannot start as asked; nothing was written. `field`: the input at fault
    where one is (reason, step, start_key), for an answer that names it."""

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.field = field


class BulkForbidden(PermissionDenied):
    """The person may not: take the action on any run at all, or cancel another person's
    job. Nothing was written."""


def bulk_preview(action: str, filters: RunFilters, *, user) -> Preview:
    """The counts a person sees before starting a bulk action (approvals.bulk_counts)."""
    spec = ACTIONS.get(action)
    if spec is None:
        raise BulkRefused(f"no action {action!r}")
    grant = grant_for(user, spec.permission)
    may = Q() if grant.everywhere else Q(workflow_id__in=grant.workflow_ids)
    return count_preview(visible_runs(user, filters), action, may)


def matches_none(filters: RunFilters) -> str:
    """What is said of a filter that matches no run the person may see: by the preview,
    which then offers nothing to start, and by a start it refuses."""
    return f"the filter ({filters.described()}) matches no run you may see"


def nothing_to_start(spec, filters: RunFilters, preview: Preview) -> str | None:
    """Why a job of action `spec` over `filters` would act on no run, by its `preview`, or
    None: the filter matches no run the person may see, or none that they may take the
    action on (they may on other workflows' runs only), so that the job would refuse every
    run. The preview then offers nothing to start, and a start is refused (start_bulk_job)."""
    if not preview.matching:
        return matches_none(filters)
    if not preview.may_act:
        label = spec.label.lower()
        return (f"no run the filter ({filters.described()}) matches is one you may {label}: "
                f"none of the {preview.matching} it matches is of a workflow where you have "
                f"runs.{spec.permission}")
    return None


def bulk_refusal(spec) -> str | None:
    """Why action `spec` is never taken by a filter, or None. A job carries one reason and
    at most a step for all its runs; an action that needs more of each run, or a person's
    eyes on each run first, is taken on the run's page."""
    if spec.takes_call:
        return f"{spec.label} is aimed at one tool call, which a filter cannot name"
    if spec.name == "event_received":
        return f"{spec.label} needs the event's payload of each run, which a job does not carry"
    if spec.name == "confirm_compensation":
        # The design: the high-impact undo is prepared and shown, and a person confirms it.
        return (f"{spec.label} sends an undo a person must see first, on each run's page")
    return None


def bulk_offered(actions, grants) -> list:
    """Of `actions`, those a person may take on some run, by `grants` (runs.permissions
    .grants_of them): any other is refused in bulk before a run is read (refuse_bulk_request),
    or on each run ticked (approvals.bulk_selected), so no page offers it to them."""
    return [a for a in actions if (g := grants(a.permission)).everywhere or g.workflow_ids]


def forbidden_in_bulk(spec, user) -> str | None:
    """Why `user` may not take action `spec` in bulk at all (bulk_offered), or None."""
    if bulk_offered([spec], grants_of(user)):
        return None
    return f"{user.get_username()} may not {spec.label.lower()} any run " \
           f"(needs runs.{spec.permission})"


def refuse_forbidden_in_bulk(spec, user) -> None:
    """BulkForbidden, with forbidden_in_bulk's sentence, for a `user` who may take action
    `spec` on no run: refused before a run is read or a job made, where it could only be
    refused run by run."""
    if (forbidden := forbidden_in_bulk(spec, user)) is not None:
        raise BulkForbidden(forbidden)


# A start key is a preview's mark (a uuid's 32 hex digits, from the console's form).
START_KEY_MAX = BulkJob._meta.get_field("start_key").max_length


def started_by(user, start_key: str) -> BulkJob | None:
    """The job `user` started under `start_key`, if any."""
    return BulkJob.objects.filter(requested_by=user, start_key=start_key).first()


def started_as(job: BulkJob, action: str, filters: RunFilters, *, reason: str,
               params: dict) -> bool:
    """Whether `job` is what a start of `action` on `filters` with `reason` and `params`
    asks for: that start sent again, not another job sent under a key already used."""
    return (job.action == action and job.params == (params or {})
            and job.reason == redact_text(reason.strip())
            and RunFilters.from_json(job.filters) == filters)


def _undeclared(step: str, workflows: list[str]) -> str | None:
    """Why no run of `workflows` can have `step`, or None: no registered version of them
    declares a step of that name (a run keeps its version; old versions stay registered)."""
    declared = sorted({s.name for name in workflows
                       for version in definition.registry.versions(name)
                       for s in version.steps})
    if step in declared or not declared:
        return None
    return f"step {quoted(step)}: no version of {', '.join(workflows)} declares it " \
           f"(its steps: {', '.join(declared)})"


def refuse_bulk_request(action: str, filters: RunFilters, *, user, reason: str,
                        params: dict | None = None) -> None:
    """start_bulk_job's refusals before it looks at the runs, in its order: BulkRefused for
    what was asked (naming the field at fault, where one is), BulkForbidden for a `user` who
    may take the action on no run. `user` None: a caller with no person to check (an API
    token acting for nobody) has what was asked judged alone, so that its faults are named
    before it is told that nobody may ask."""
    if (spec := ACTIONS.get(action)) is None:
        raise BulkRefused(f"no action {action!r}")
    if (refusal := bulk_refusal(spec)) is not None:
        raise BulkRefused(f"{refusal}: not in bulk")
    if not reason or not reason.strip():
        raise BulkRefused("a bulk action needs a reason", field="reason")
    if (problem := person_text_problem(reason)) is not None:
        raise BulkRefused(f"reason: {problem}", field="reason")
    if (problem := mark_problem(redact_text(reason.strip()))) is not None:
        # With the reason's other faults, for every caller: not once a job is made.
        raise BulkRefused(problem, field="reason")
    if user is not None:
        # Each run is checked again as it is acted on; this spares a job that could only
        # be refused run by run. Before the names: which workflows have runs is not told
        # to whoever may not act.
        refuse_forbidden_in_bulk(spec, user)
    if filters.workflow.strip() and not (names := filtered_workflow_names(filters)):
        # A misspelt workflow would make a job of no run, done at once: say so instead.
        raise BulkRefused(f"no run of {filters.workflow.strip()!r} was ever started"
                          if filters.workflow_exact else
                          f"no workflow's name contains {filters.workflow.strip()!r}")
    if (step := (params or {}).get("step")) and filters.workflow.strip() and \
            (unknown := _undeclared(step, names)) is not None:
        # Each of its runs would refuse it: a job refused run by run.
        raise BulkRefused(unknown, field="step")


def start_bulk_job(action: str, filters: RunFilters, *, user, reason: str,
                   params: dict | None = None, previewed: int | None = None,
                   start_key: str = "",
                   now: datetime | None = None) -> tuple[BulkJob, bool]:
    """Record a bulk job over the runs `filters` matches now that `user` may see; a worker
    carries it out (run_bulk_job). Refuses an unknown action, a missing reason, an action
    never taken by a filter (bulk_refusal), a filter that matches no run or none the person
    may take the action on (nothing_to_start, naming it), and a person who may take the
    action nowhere (BulkForbidden). `previewed`: how many runs the person was shown they may
    act on (the preview's count, on its button); refused if the filter now matches more (an
    incident may have brought hundreds into it since), started if as many or fewer.
    `start_key`: the mark of the form that starts it (a preview's); the job that form
    started already, if it did, is returned instead of a second one (a double click, a form
    sent again). Returns the job and whether this call made it, as Django's get_or_create
    does."""
    spec = ACTIONS.get(action)
    if spec is None:
        raise BulkRefused(f"no action {action!r}")
    if len(start_key) > START_KEY_MAX or text_problem(start_key) is not None:
        raise BulkRefused(f"start_key: at most {START_KEY_MAX} characters of text",
                          field="start_key")
    if start_key and (started := started_by(user, start_key)) is not None:
        return started, False
    refuse_bulk_request(action, filters, user=user, reason=reason, params=params)
    preview = bulk_preview(action, filters, user=user)
    if (nothing := nothing_to_start(spec, filters, preview)) is not None:
        raise BulkRefused(nothing)
    if previewed is not None and (now_matching := preview.may_act) > previewed:
        raise BulkRefused(
            f"the filter matches {now_matching} runs you may {spec.label.lower()} now, more "
            f"than the {previewed} the preview counted. Check them in a new preview, then "
            "start again (an Until time in the filter leaves out the runs that changed after "
            "it)")
    now = now or timezone.now()
    runs = visible_runs(user, filters)
    try:
        with transaction.atomic():
            last = runs.order_by("-pk").values_list("pk", flat=True).first() or 0
            if not (total := runs.filter(pk__lte=last).count()):
                # A job of no run would be done at once, as if it had acted (the runs may
                # have left the filter since nothing_to_start counted them).
                raise BulkRefused(matches_none(filters))
            job = BulkJob.objects.create(
                action=action, filters=filters.to_json(), reason=redact_text(reason.strip()),
                params=params or {}, requested_by=user, created_at=now, last_run_id=last,
                total=total, start_key=start_key, sight=sight_at_start(user))
            # Whoever starts it (the console, the API, the command line): a worker is told
            # once the job is committed, not before, nor if this is rolled back.
            transaction.on_commit(partial(hand_over, job.pk))
            # Each run's record carries the reason with the job's mark, held to the length
            # of a person's text: one that fits only without it would be refused on every
            # run.
            # (refuse_bulk_request refused it for the least number the job could have.)
            if (problem := mark_problem(job.reason, job.pk)) is not None:
                raise BulkRefused(problem, field="reason")
    except IntegrityError:
        # The same form, sent at the same moment, started its job first.
        if start_key and (started := started_by(user, start_key)) is not None:
            return started, False
        raise
    logger.info("bulk job %s: %s on %d runs by %s", job.pk, action, job.total,
                user.get_username())
    return job, True


def may_follow(user, job: BulkJob) -> bool:
    """Whether `user` may follow and cancel `job`: the person who started it, or a
    superuser."""
    return job.requested_by_id == user.pk or user.is_superuser


def may_watch(user, job: BulkJob) -> bool:
    """Whether `user` may see `job`'s progress (read only; the one rule of the console's
    page, the API and the command line): whoever may follow it, and its second person
    (is_second_person)."""
    return may_follow(user, job) or is_second_person(user, job)


def is_second_person(user, job: BulkJob) -> bool:
    """Whether `user` decided `job`'s request, or may decide it while it waits: the runs it
    lists, their outcomes and the approval's progress are the job's page's, which the
    request's page sends them to."""
    if job.approval_id is None:
        return False
    approval = job.approval
    if approval.decided_by_id is not None:
        return approval.decided_by_id == user.pk
    return approval.is_pending and can_decide(user, approval)


def cancel_bulk_job(job_id: int, *, user) -> bool:
    """Stop a running job before its next run; what it did stays done. False if it had
    already finished; BulkForbidden (nothing changes) for a person who may not follow it."""
    job = BulkJob.objects.get(pk=job_id)
    if not may_follow(user, job):
        logger.warning("bulk job %s: %s (id %s) may not cancel it; refused", job_id,
                       user.get_username(), user.pk)
        raise BulkForbidden(f"bulk job {job_id} is another person's: only "
                            f"{job.requested_by.get_username()} or a superuser may cancel it")
    cancelled = bool(BulkJob.objects.filter(pk=job_id, status=BulkJobStatus.RUNNING).update(
        status=BulkJobStatus.CANCELLED, cancelled_by=user, finished_at=timezone.now(),
        lease_until=None))
    if cancelled:
        # No worker comes back for a claim left "claimed": said done or not reached now.
        settle_claims(job)
    return cancelled


def run_bulk_job(job_id: int, *, batches: int | None = None,
                 now: datetime | None = None) -> BulkJob:
    """Work job `job_id` through, a batch of runs at a time, while it is running and this
    worker holds its lease (`batches`: stop after that many, for a worker that hands on):
    acting on the runs its filter matched, or, once its request is approved, on those that
    waited for the second person (approvals.bulk_approved). A worker that loses the job
    (approvals.bulk_lease: taken over, cancelled, approved while it finished) stops."""
    held = take(job_id, now or clock())
    if held is None:
        return BulkJob.objects.get(pk=job_id)
    job = BulkJob.objects.select_related("requested_by").get(pk=job_id)
    # A claim left by a worker that died: settled first, since the action it may have
    # taken can have moved its run out of the filter. (Applying leaves no claims: each run
    # is done in one commit.)
    for run_id in BulkOutcome.objects.filter(job=job, outcome=Outcome.CLAIMED) \
            .values_list("run_id", flat=True):
        if job.phase == BulkJobPhase.ACTING and not _one(job, run_id, held):
            return BulkJob.objects.get(pk=job_id)
    done_batches = 0
    while batches is None or done_batches < batches:
        job = BulkJob.objects.select_related("requested_by", "approval__requested_by") \
            .get(pk=job_id)
        if job.status != BulkJobStatus.RUNNING:
            return job
        if job.phase == BulkJobPhase.APPLYING:
            ids, each = waiting_runs(job, BATCH), apply_one
        else:
            ids, each = list(job_runs(job)
                             .filter(pk__gt=job.cursor, pk__lte=job.last_run_id)
                             .order_by("pk").values_list("pk", flat=True)[:BATCH]), _one
        for run_id in ids:
            # Cancelled, or taken over by another worker while this one stalled: stop.
            if not each(job, run_id, held) or \
                    (held := renew(job_id, held, cursor=run_id)) is None:
                return BulkJob.objects.get(pk=job_id)
        done_batches += 1
        if len(ids) < BATCH:
            return _finish(job)
    release(job_id, held)
    return BulkJob.objects.get(pk=job_id)


def _one(job: BulkJob, run_id: int, held: datetime) -> bool:
    """Take the job's action on run `run_id` once, under the lease marked `held`. False,
    with nothing done, if the job is no longer this worker's."""
    now = timezone.now()
    try:
        with transaction.atomic():
            hold(job.pk, held)
            BulkOutcome.objects.create(job=job, run_id=run_id, outcome=Outcome.CLAIMED, at=now)
    except LeaseLost:
        return False
    except IntegrityError:
        existing = BulkOutcome.objects.get(job=job, run_id=run_id)
        if existing.outcome != Outcome.CLAIMED:
            return True  # settled before the worker died: never again
        # The worker that claimed it acted, if at all, while it held the job: the take
        # waited for that action's commit (bulk_lease.hold), so its record is seen here.
        if AuditRecord.objects.filter(run_id=run_id, reason=marked(job.reason, job.pk)) \
                .exists():
            return settle_claim(job, run_id, held, Outcome.DONE, "done (found in the audit trail "
                            "after a worker stopped)")
    crashpoints.reach("bulk_claimed", str(run_id))
    given = job_input(job, run_id)
    try:
        outcome = act(job.action, run_id, user=job.requested_by, given=given,
                      defer_second_person=True, guard=partial(_still_ours, job, run_id, held))
    except LeaseLost:
        return False  # its claim is the new holder's to settle
    except MovedOn:
        # Not acted on: counted with the runs the filter no longer matched when reached.
        return settle_claim(job, run_id, held, None, "")
    except LostSight:
        return settle_claim(job, run_id, held, Outcome.NOT_VISIBLE, "")
    except ActionForbidden as exc:
        # Refused as one the person may no longer see, if so: nothing more is said of it.
        lost = lost_sight(job, run_id)
        return settle_claim(job, run_id, held, Outcome.NOT_VISIBLE if lost else
                            Outcome.FORBIDDEN, "" if lost else str(exc))
    except (ActionInputError, TransitionNotAllowed, LookupError) as exc:
        return settle_claim(job, run_id, held, Outcome.REFUSED, str(exc))
    except OperationalError as exc:
        if not would_not_wait(exc):
            raise
        return settle_claim(job, run_id, held, Outcome.REFUSED, "another session held the run "
                        "too long; nothing was done to it: act on it again")
    crashpoints.reach("bulk_acted", str(run_id))
    return settle_claim(job, run_id, held,
                    Outcome.SECOND_PERSON if outcome.deferred else Outcome.DONE,
                    outcome.message)


class MovedOn(Exception):
    """The run left the job's filter since its batch was listed; nothing was done to it."""


def _still_ours(job: BulkJob, run_id: int, held: datetime) -> None:
    """act's last check of a job's run, with the run locked: the job is still this worker's
    (LeaseLost), the run still matches its filter (MovedOn) and its person may still see
    it (LostSight). Listed a batch ago, it may have been resumed, reconciled or ended by
    another person since: the action was asked of the runs the filter matched, not of one
    that moved on."""
    hold(job.pk, held)
    if not job_runs(job).filter(pk=run_id).exists():
        raise MovedOn(f"run {run_id} no longer matches bulk job {job.pk}'s filter")
    if lost_sight(job, run_id):
        raise LostSight(f"run {run_id} is no longer visible to bulk job {job.pk}'s person")


def _finish(job: BulkJob) -> BulkJob:
    if job.phase == BulkJobPhase.ACTING and job.approval_id is None and (waiting := list(
            BulkOutcome.objects.filter(job=job, outcome=Outcome.SECOND_PERSON)
            .order_by("run_id").values_list("run_id", flat=True))):
        # It names itself on the job as it is made (a request replaced since has moved the
        # job on: approvals.requests.supersede), so the job's approval is not written here.
        ask_second_person(job, waiting)
    # Of the phase this worker worked: a job approved as its request was made is applying
    # the approval now, not done.
    BulkJob.objects.filter(pk=job.pk, status=BulkJobStatus.RUNNING, phase=job.phase).update(
        status=BulkJobStatus.DONE, finished_at=timezone.now(), lease_until=None)
    return BulkJob.objects.get(pk=job.pk)


@dataclass(frozen=True)
class Progress:
    job: BulkJob
    counts: dict[str, int]

    @property
    def handled(self) -> int:
        return sum(n for outcome, n in self.counts.items() if outcome != Outcome.CLAIMED)

    @property
    def skipped(self) -> int:
        """Of a job done, the runs the filter matched when it started that, when the worker
        reached them, no longer matched it (another person, or the run itself, had moved
        them on): not acted on, and with no outcome of their own. (A run its person lost
        sight of has its own, not_visible: approvals.bulk_sight; of a job started by the
        release before, it is counted here.) 0 until the job is done."""
        if self.job.status != BulkJobStatus.DONE:
            return 0
        return max(self.job.total - self.handled, 0)


def bulk_progress(job_id: int) -> Progress:
    job = BulkJob.objects.select_related("approval", "requested_by").get(pk=job_id)
    counts = dict(BulkOutcome.objects.filter(job=job).values_list("outcome")
                  .annotate(n=Count("pk")).values_list("outcome", "n"))
    return Progress(job, counts)
