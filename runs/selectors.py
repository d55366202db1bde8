"""Reads for the console: the runs list, the attention list, a run's detail.

Each is a fixed number of queries whatever the number of runs, steps and audit records:
per-row facts (the last error, the current step's attempts) come from subqueries, and the
caller passes the workflows the user may see, computed once per request.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Exists, Max, OuterRef, Q, QuerySet, Subquery, prefetch_related_objects
from django.utils import timezone

from audit.models import AuditRecord

from .agent_models import AgentTurn
from .definition import AGENT
from .models import ATTENTION_RUN_STATUSES, FINAL_RUN_STATUSES, Run, RunStatus, Step

PAGE_SIZE = 50
# A waiting run whose wake-up time passed this long ago is stuck: nobody picked it up.
STUCK_GRACE = timedelta(minutes=1)


@dataclass(frozen=True)
class RunFilters:
    status: str = ""
    workflow: str = ""
    step_status: str = ""
    error_class: str = ""
    attention: bool = False
    stuck: bool = False
    q: str = ""
    # Drill runs (runs.drills) are left out unless asked for.
    drills: bool = False


def _visible(workflow_ids: frozenset[int] | None) -> QuerySet:
    runs = Run.objects.all()
    return runs if workflow_ids is None else runs.filter(workflow_id__in=workflow_ids)


def _row_facts() -> dict[str, Subquery]:
    errored = Step.objects.filter(run=OuterRef("pk")).exclude(error_class="") \
        .order_by("-updated_at")
    current = Step.objects.filter(run=OuterRef("pk"), name=OuterRef("current_step"))
    return {
        "last_error_class": Subquery(errored.values("error_class")[:1]),
        "last_error_message": Subquery(errored.values("error_message")[:1]),
        "current_attempt": Subquery(current.values("attempt")[:1]),
    }


# Built once: building the subqueries anew cost each list page 0.7 ms of Python.
# annotate() resolves a copy of each expression, so the page's queries never change these.
_ROW_FACTS = _row_facts()


def _with_row_facts(runs: QuerySet) -> QuerySet:
    return runs.annotate(**_ROW_FACTS)


def filter_runs(filters: RunFilters, *, workflow_ids: frozenset[int] | None,
                now: datetime | None = None) -> QuerySet:
    """The runs a user may see that match `filters`, all but the search (filters.q): that
    is a union of index lookups, see runs_page."""
    now = now or timezone.now()
    runs = _visible(workflow_ids)
    if not filters.drills:
        runs = runs.filter(drill=False)
    if filters.status:
        runs = runs.filter(status=filters.status)
    if filters.workflow:
        runs = runs.filter(workflow_name=filters.workflow)
    if filters.attention:
        runs = runs.filter(status__in=ATTENTION_RUN_STATUSES)
    if filters.stuck:
        runs = runs.filter(
            Q(status__in=[RunStatus.RUNNING, RunStatus.COMPENSATING], lease_expires_at__lt=now)
            | Q(status=RunStatus.WAITING, next_wake_at__lt=now - STUCK_GRACE))
    if filters.step_status:
        runs = runs.filter(Exists(Step.objects.filter(run=OuterRef("pk"),
                                                      status=filters.step_status)))
    if filters.error_class:
        runs = runs.filter(Exists(Step.objects.filter(run=OuterRef("pk"),
                                                      error_class=filters.error_class)))
    return runs


# What a search matches, each through its own index: the start of a business key
# (run_business_key_prefix_idx), or exactly a step's idempotency key (step_key_idx), remote
# reference (step_remote_ref_idx) or compensation reference (step_compensation_ref_idx).
SEARCHED_STEP_FIELDS = ("idempotency_key", "remote_ref", "compensation_ref")


def search_branches(runs: QuerySet, q: str) -> list[QuerySet]:
    """`runs` narrowed to each way a run can match the search `q`, one queryset per way."""
    branches = [runs.filter(business_key__startswith=q)]
    branches += [runs.filter(pk__in=Step.objects.filter(**{field: q}).values("run_id"))
                 for field in SEARCHED_STEP_FIELDS]
    if q.isascii() and q.isdigit() and int(q) < 2**63:
        branches.append(runs.filter(pk=int(q)))
    return branches


def runs_page(filters: RunFilters, *, workflow_ids: frozenset[int] | None,
              after: tuple[datetime, int] | None = None, limit: int | None = None,
              now: datetime | None = None) -> tuple[list[Run], tuple[datetime, int] | None]:
    """One page of the runs list, newest status change first, and the cursor of the next
    page (keyset pagination: the cost of page N does not grow with N)."""
    limit = limit or PAGE_SIZE
    order = ("-updated_at", "-pk")
    runs = filter_runs(filters, workflow_ids=workflow_ids, now=now)
    if after is not None:
        updated, pk = after
        runs = runs.filter(Q(updated_at__lt=updated) | Q(updated_at=updated, pk__lt=pk))
    # The page's ids first, ordered and cut along an index, then those rows with their
    # facts, in one statement: the filters and the order read only (id, updated_at,
    # status), which an index can hold and answer alone (index-only scan); selecting
    # whole rows instead makes PostgreSQL fetch from the table every run the filters look
    # at (all ten thousand runs in attention for "in attention with an unknown error",
    # to keep fifty).
    q = filters.q.strip()
    if not q:
        ids = runs.order_by(*order).values("pk")[: limit + 1]
    else:
        # One OR across the ways of matching would be one plan for all of them, and the
        # best PostgreSQL has for it walks every run or every step (seconds at ten million
        # steps). Instead each way is its own subquery, ordered and cut to a page along
        # its own index, and the page is the first rows of their union.
        branches = [b.order_by(*order).values_list("pk", flat=True)[: limit + 1]
                    for b in search_branches(runs, q)]
        if connection.features.supports_slicing_ordering_in_compound:
            ids = branches[0].union(*branches[1:])
        else:  # SQLite (the demo): a query per way of matching
            ids = [pk for branch in branches for pk in branch]
    runs = Run.objects.filter(pk__in=ids)
    rows = list(_with_row_facts(runs).order_by(*order)[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, ((rows[-1].updated_at, rows[-1].pk) if more and rows else None)


def runs_by_ids(ids: list[int], *, workflow_ids: frozenset[int] | None) -> list[Run]:
    """Fresh rows for the live refresh of the rows a page shows."""
    return list(_with_row_facts(_visible(workflow_ids).filter(pk__in=ids))
                .order_by("-updated_at", "-pk"))


COUNT_CAP = 10_000


def status_counts(*, workflow_ids: frozenset[int] | None) -> dict[str, int]:
    """Runs per status, for the counts at the top of the list, each counted up to COUNT_CAP
    (one index range per status): an exact count of a million completed runs would cost
    more than the page, and past ten thousand nobody reads the digits. One query."""
    if workflow_ids is not None and not workflow_ids:  # sees nothing (and IN () has no SQL)
        return dict.fromkeys(RunStatus.values, 0)
    runs = _visible(workflow_ids)
    # One statement of a scalar subquery per status rather than a query per status: the
    # counts cost the same index ranges, and a page pays one round trip for them, not ten.
    parts, params = [], []
    for status in RunStatus:
        counted = runs.filter(status=status.value)
        if status in ATTENTION_RUN_STATUSES:
            # The attention counts leave drill runs out, as the attention list does
            # (run_attention_live_idx answers them alone).
            counted = counted.filter(drill=False)
        capped = counted.values("pk")[: COUNT_CAP + 1]
        sql, capped_params = capped.query.sql_with_params()
        parts.append(f"(SELECT COUNT(*) FROM ({sql}) AS capped)")
        params.extend(capped_params)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(parts)}", params)
        counts = cursor.fetchone()
    return {status.value: n for status, n in zip(RunStatus, counts, strict=True)}


ATTENTION_PAGE_SIZE = 50


@dataclass(frozen=True)
class AttentionPage:
    runs: list[Run]
    # How many runs need a person, counted up to COUNT_CAP; `more_than_cap` when there are
    # more (then `total` is COUNT_CAP).
    total: int
    more_than_cap: bool
    next_cursor: tuple[datetime, int] | None


def attention_page(*, workflow_ids: frozenset[int] | None,
                   after: tuple[datetime, int] | None = None,
                   limit: int | None = None, drills: bool = False) -> AttentionPage:
    """One page of the runs that need a person, oldest first, keyset-paged on (updated_at,
    id) along run_attention_keyset_idx, and how many there are in all (two queries)."""
    limit = limit or ATTENTION_PAGE_SIZE
    runs = _visible(workflow_ids).filter(status__in=ATTENTION_RUN_STATUSES)
    if not drills:  # drill runs (runs.drills) count only when asked for
        runs = runs.filter(drill=False)
    total = runs[: COUNT_CAP + 1].count()
    if after is not None:
        updated, pk = after
        runs = runs.filter(Q(updated_at__gt=updated) | Q(updated_at=updated, pk__gt=pk))
    rows = list(_with_row_facts(runs).order_by("updated_at", "pk")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return AttentionPage(runs=rows, total=min(total, COUNT_CAP),
                         more_than_cap=total > COUNT_CAP,
                         next_cursor=(rows[-1].updated_at, rows[-1].pk) if more and rows
                         else None)


def steps_of(runs: list[Run]) -> dict[int, list[Step]]:
    """The steps of each of `runs`, in order, in one query (what actions a list page offers
    depends on them); for agent steps also what the actions on one tool call are offered
    from, their calls and newest turn: two more queries for the page when it has any,
    whatever their number."""
    steps: dict[int, list[Step]] = {run.pk: [] for run in runs}
    agent_steps = []
    for step in Step.objects.filter(run_id__in=list(steps)).order_by("run_id", "position"):
        steps[step.run_id].append(step)
        if step.kind == AGENT:
            agent_steps.append(step)
    if agent_steps:
        prefetch_related_objects(agent_steps, "tool_calls")
        newest = dict(AgentTurn.objects.filter(step__in=agent_steps).values("step_id")
                      .annotate(newest=Max("index")).values_list("step_id", "newest"))
        for step in agent_steps:
            step.newest_turn = newest.get(step.pk, 0)
    return steps


@dataclass(frozen=True)
class RunDetail:
    run: Run
    steps: list[Step]
    audit: list[AuditRecord]


def run_detail(run_id: int) -> RunDetail:
    """A run with its steps and the outline of its audit log, three queries. The outline is
    the newest record of each (step, action), in seq order, as unsaved records holding
    seq, action and step_name: all the investigation card cites (the newest record of a
    kind), tens of rows where a run retried for days has thousands of records. The records
    in full are read a page at a time, for the timeline (console.timeline)."""
    run = Run.objects.get(pk=run_id)
    steps = list(Step.objects.filter(run=run).order_by("position"))
    outline = (AuditRecord.objects.filter(run=run).values("step_name", "action")
               .annotate(newest=Max("seq")).order_by("newest"))
    audit = [AuditRecord(run=run, seq=row["newest"], action=row["action"],
                         step_name=row["step_name"]) for row in outline]
    return RunDetail(run=run, steps=steps, audit=audit)


def is_final(run: Run) -> bool:
    return run.status in FINAL_RUN_STATUSES
