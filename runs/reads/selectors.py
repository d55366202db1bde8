"""Reads for the console: the runs list, the attention list, a run's detail.

Each is a fixed number of queries whatever the number of runs, steps and audit records:
per-row facts (the last error, the current step's attempts) come from subqueries, and the
caller passes the workflows the user may see, computed once per request.
"""

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from functools import cached_property

from django.db import connection
from django.db.models import (
    Exists,
    F,
    Max,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    prefetch_related_objects,
)
from django.utils import timezone

from audit.models import AuditRecord

from ..agent_models import AgentTurn, ToolCall
from ..definitions.definition import AGENT
from ..models import (
    ATTENTION_RUN_STATUSES,
    FINAL_RUN_STATUSES,
    HELD_RUN_STATUSES,
    Run,
    RunStatus,
    Step,
    Workflow,
)
from .cursors import keyset_after
from .search import search_branches
from .step_rows import steps_in_order

PAGE_SIZE = 50
# A waiting run whose wake-up time passed this long ago is stuck: nobody picked it up.
STUCK_GRACE = timedelta(minutes=1)


# How the runs list may be sorted: the columns of each order, the last of which makes a row's
# place unique (the keyset of its pages), each order read along an index (see Run.Meta). No
# index may name current_step, which each step's checkpoint changes: the order by step reads
# the runs no worker holds along listed_step (their current step, kept by the database) and
# sorts the held ones, few, beside them (see _by_step_ids).
SORTS = {
    "updated": ("updated_at", "id"),
    "created": ("created_at", "id"),
    "workflow": ("workflow_name", "business_key"),
    "status": ("status", "updated_at", "id"),
    "step": ("current_step", "id"),
}
DEFAULT_SORT = "-updated"
# The relative periods a list can be narrowed to.
PERIODS = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}
TIME_FIELDS = {"updated": "updated_at", "created": "created_at"}


@dataclass(frozen=True)
class RunFilters:
    status: str = ""
    workflow: str = ""
    step_status: str = ""
    error_class: str = ""
    attention: bool = False
    stuck: bool = False
    q: str = ""
    # A time range on `time_field` (updated or created): a relative period, or since/until.
    time_field: str = "updated"
    period: str = ""
    since: datetime | None = None
    until: datetime | None = None
    # One of SORTS, "-" first for the descending order.
    sort: str = DEFAULT_SORT

    # Drill runs (runs.operator.drills) are left out unless asked for.
    drills: bool = False
    # `workflow` names one workflow whole (a token's: the API's bulk jobs), not a part of
    # names: test-agent does not reach test-agent-saga.
    workflow_exact: bool = False

    def to_json(self) -> dict:
        """The filters as JSON can hold them (a bulk job keeps the filter it acts on).
        `workflow_exact` only where set: a job of the console's filters stays readable by a
        worker of the release before it (a rolling release), and a job that names its
        workflow whole is refused by such a worker rather than carried out more widely."""
        data = {name: value.isoformat() if isinstance(value, datetime) else value
                for name, value in asdict(self).items()}
        if not self.workflow_exact:
            del data["workflow_exact"]
        return data

    def described(self) -> str:
        """The filter as a person reads it in a message: each field it sets, name=value (a
        time in ISO 8601, which field it bounds only where one is given); the order, which
        picks no run, left out."""
        timed = bool(self.period or self.since or self.until)
        shown = []
        for name, value in asdict(self).items():
            if name in ("sort", "workflow_exact") or value == getattr(RunFilters, name) \
                    or (name == "time_field" and not timed):
                continue
            # A status is a str enum: its value, not its member's name.
            shown.append(f"{name}={value.isoformat()}" if isinstance(value, datetime) else
                         f"{name}={str(value)!r}" if isinstance(value, str) else
                         f"{name}={value}")
        return ", ".join(shown) or "none (every run)"

    @classmethod
    def from_json(cls, data: dict) -> "RunFilters":
        values = dict(data)
        for name in ("since", "until"):
            if values.get(name):
                values[name] = datetime.fromisoformat(values[name])
        return cls(**values)


def sort_columns(sort: str) -> tuple[tuple[str, ...], bool]:
    """The columns of `sort` (an unknown one falls back to the default) and whether they
    are read descending."""
    descending = sort.startswith("-")
    columns = SORTS.get(sort.lstrip("-"))
    if columns is None:
        return SORTS[DEFAULT_SORT.lstrip("-")], True
    return columns, descending


def _order_by(sort: str) -> list[str]:
    columns, descending = sort_columns(sort)
    return [("-" if descending else "") + ("pk" if c == "id" else c) for c in columns]


STEP_SORT = "step"


def _after(runs: QuerySet, sort: str, cursor: tuple, *,
           columns: tuple[str, ...] | None = None) -> QuerySet:
    """`runs` past the row whose sort columns hold `cursor` in the order `sort` (keyset_after).
    `columns` names the sort's columns otherwise (listed_step for current_step)."""
    sort_cols, descending = sort_columns(sort)
    return keyset_after(runs, columns or sort_cols, cursor, descending=descending)


def cursor_of(run: Run, sort: str) -> tuple:
    """Where the next page after `run` starts, in the order `sort`."""
    columns, _ = sort_columns(sort)
    return tuple(getattr(run, "pk" if c == "id" else c) for c in columns)


def workflow_names_matching(text: str) -> QuerySet:
    """The workflow rows whose name contains `text` (the workflows table holds one row per
    workflow: tens of rows, whatever the number of runs)."""
    return Workflow.objects.filter(name__icontains=text.strip())


def filtered_workflow_names(filters: RunFilters) -> list[str]:
    """The names of the workflows (with runs) that `filters.workflow` names: the one it
    names whole, or those whose name contains it."""
    named = (Workflow.objects.filter(name=filters.workflow.strip()) if filters.workflow_exact
             else workflow_names_matching(filters.workflow))
    return list(named.values_list("name", flat=True))


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


def time_range(filters: RunFilters, now: datetime) -> tuple[datetime | None, datetime | None]:
    """The (since, until) of the filters' time range; a relative period wins over dates."""
    if filters.period in PERIODS:
        return now - PERIODS[filters.period], None
    return filters.since, filters.until


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
        # A part of a name finds the workflows it names, read first (a query of the small
        # workflows table): given the names as constants the planner reads the runs of
        # those workflows, and none at all when no workflow matches, where a subquery
        # made it walk every run by the list's order, testing each against it.
        names = filtered_workflow_names(filters)
        runs = runs.filter(workflow_name__in=names) if names else runs.none()
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
    since, until = time_range(filters, now)
    column = TIME_FIELDS.get(filters.time_field, "updated_at")
    if since is not None:
        runs = runs.filter(**{f"{column}__gte": since})
    if until is not None:
        runs = runs.filter(**{f"{column}__lt": until})
    return runs


def runs_matching(filters: RunFilters, *, workflow_ids: frozenset[int] | None,
                  now: datetime | None = None) -> QuerySet:
    """Every run a user may see that `filters` matches, the search (filters.q) included: what
    a bulk job acts on, the same runs as the list shows page by page."""
    runs = filter_runs(filters, workflow_ids=workflow_ids, now=now)
    q = filters.q.strip()
    if not q:
        return runs
    matches = Q()
    for branch in search_branches(runs, q):
        matches |= Q(pk__in=branch.values("pk"))
    return runs.filter(matches)


def _by_step_ids(runs: QuerySet, sort: str, after: tuple | None, limit: int):
    """The ids of a page in the order by step: the runs no worker holds along
    run_listed_step_idx, the held ones (found by run_held_idx) sorted on their current step,
    each cut to a page; the page is the first rows of their union. Every run is in exactly
    one of the two, and for the first listed_step is current_step."""
    descending = sort.startswith("-")
    sign = "-" if descending else ""
    listed = runs.filter(listed_step__isnull=False)
    held = runs.filter(status__in=HELD_RUN_STATUSES)  # listed_step is NULL for them
    if after is not None:
        listed = _after(listed, sort, after, columns=("listed_step", "id"))
        held = _after(held, sort, after)
    listed_page = listed.order_by(f"{sign}listed_step", f"{sign}pk")
    held_page = held.order_by(f"{sign}current_step", f"{sign}pk")
    return (listed_page.values_list("pk", flat=True)[: limit + 1]
            .union(held_page.values_list("pk", flat=True)[: limit + 1], all=True))


def _page_ids(runs: QuerySet, q: str, order: list[str], limit: int):
    """The ids of the page's runs, as a subquery (PostgreSQL) or a list."""
    # The page's ids first, ordered and cut along an index, then those rows with their
    # facts, in one statement: the filters and the order read only (id, updated_at,
    # status), which an index can hold and answer alone (index-only scan); selecting
    # whole rows instead makes PostgreSQL fetch from the table every run the filters look
    # at (all ten thousand runs in attention for "in attention with an unknown error",
    # to keep fifty).
    if not q:
        return runs.order_by(*order).values("pk")[: limit + 1]
    # One OR across the ways of matching would be one plan for all of them, and the
    # best PostgreSQL has for it walks every run or every step (seconds at ten million
    # steps). Instead each way is its own subquery, ordered and cut to a page along
    # its own index, and the page is the first rows of their union.
    branches = [b.order_by(*order).values_list("pk", flat=True)[: limit + 1]
                for b in search_branches(runs, q)]
    if connection.features.supports_slicing_ordering_in_compound:
        return branches[0].union(*branches[1:])
    return [pk for branch in branches for pk in branch]  # SQLite (the demo): one per way


def runs_page(filters: RunFilters, *, workflow_ids: frozenset[int] | None,
              after: tuple | None = None, limit: int | None = None,
              now: datetime | None = None) -> tuple[list[Run], tuple | None]:
    """One page of the runs list in the order filters.sort (newest status change first by
    default), and the cursor of the next page (keyset pagination: the cost of page N does
    not grow with N). A cursor holds the values of the sort's columns (see cursor_of)."""
    limit = limit or PAGE_SIZE
    sort = filters.sort if filters.sort.lstrip("-") in SORTS else DEFAULT_SORT
    order = _order_by(sort)
    runs = filter_runs(filters, workflow_ids=workflow_ids, now=now)
    q = filters.q.strip()
    if sort.lstrip("-") == STEP_SORT and not q \
            and connection.features.supports_slicing_ordering_in_compound:
        ids = _by_step_ids(runs, sort, after, limit)
    else:
        if after is not None:
            runs = _after(runs, sort, after)
        ids = _page_ids(runs, q, order, limit)
    runs = Run.objects.filter(pk__in=ids)
    rows = list(_with_row_facts(runs).order_by(*order)[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (cursor_of(rows[-1], sort) if more and rows else None)


NEW_CAP = 99
# A run's updated_at is stamped by the clock of the process that changed it, and becomes
# visible when its transaction commits, a moment later: a page drawn meanwhile missed it
# although its stamp is older than the page. The "new" count looks this far back before
# the page was drawn, leaving out the runs the page shows.
NEW_LOOKBACK = timedelta(seconds=5)


def _looked_back(since: datetime) -> datetime:
    """`since` less NEW_LOOKBACK, or the earliest time there is where none is that early: a
    hand-edited link's year 1 counts from then rather than failing (OverflowError)."""
    try:
        return since - NEW_LOOKBACK
    except OverflowError:
        return datetime.min.replace(tzinfo=since.tzinfo)


def new_runs_count(filters: RunFilters, *, workflow_ids: frozenset[int] | None,
                   since: datetime, shown: list[int] | tuple = (),
                   now: datetime | None = None) -> int:
    """How many runs matching `filters`, other than the `shown` ones, changed status (or
    started) after `since` (the moment a page was drawn, less NEW_LOOKBACK), counted up to
    NEW_CAP + 1: one query, along the same indexes as the page (the updated_at range of
    run_updated_idx, or each search branch's)."""
    runs = filter_runs(filters, workflow_ids=workflow_ids, now=now) \
        .filter(updated_at__gt=_looked_back(since)).exclude(pk__in=list(shown))
    q = filters.q.strip()
    if not q:
        return runs.values("pk")[: NEW_CAP + 1].count()
    ids = _page_ids(runs, q, ["-updated_at", "-pk"], NEW_CAP)
    if isinstance(ids, list):
        return len(set(ids))
    return Run.objects.filter(pk__in=ids).count()


def runs_by_ids(ids: list[int], *, workflow_ids: frozenset[int] | None) -> list[Run]:
    """Fresh rows for the live refresh of the rows a page shows, in the order of `ids` (the
    page's, whatever its sort): ordered anew, the refresh moved rows against the column the
    person sorted by and the cursor its next page goes on from."""
    place = {pk: i for i, pk in enumerate(ids)}
    rows = list(_with_row_facts(_visible(workflow_ids).filter(pk__in=ids)))
    return sorted(rows, key=lambda run: place[run.pk])


COUNT_CAP = 10_000


def status_counts(*, workflow_ids: frozenset[int] | None) -> dict[str, int]:
    """Runs per status, for the counts at the top of the list, each counted up to COUNT_CAP
    (one index range per status): an exact count of a million completed runs would cost
    more than the page, and past ten thousand nobody reads the digits. One query. Drill
    runs are left out, as the list each count links to leaves them out."""
    if workflow_ids is not None and not workflow_ids:  # sees nothing (and IN () has no SQL)
        return dict.fromkeys(RunStatus.values, 0)
    runs = _visible(workflow_ids)
    # One statement of a scalar subquery per status rather than a query per status: the
    # counts cost the same index ranges, and a page pays one round trip for them, not ten.
    parts, params = [], []
    for status in RunStatus:
        # Without drill runs, as every list a count links to (run_attention_live_idx
        # answers the attention statuses' counts alone).
        counted = runs.filter(status=status.value, drill=False)
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
    if not drills:  # drill runs (runs.operator.drills) count only when asked for
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


def attention_new_count(*, workflow_ids: frozenset[int] | None, since: datetime,
                        shown: list[int] | tuple = (), drills: bool = False) -> int:
    """How many runs other than the `shown` ones entered attention (or moved within it)
    after `since` (less NEW_LOOKBACK, see there), up to NEW_CAP + 1: one range of
    run_attention_keyset_idx. Drill runs only with `drills`, as attention_page counts."""
    runs = _visible(workflow_ids).filter(status__in=ATTENTION_RUN_STATUSES,
                                         updated_at__gt=_looked_back(since)) \
        .exclude(pk__in=list(shown))
    if not drills:
        runs = runs.filter(drill=False)
    return runs.values("pk")[: NEW_CAP + 1].count()


def steps_of(runs: list[Run]) -> dict[int, list[Step]]:
    """The steps of each of `runs`, in order, in one query (what actions a list page offers
    depends on them); for agent steps also what the actions on one tool call are offered
    from, their calls and newest turn: two more queries for the page when it has any,
    whatever their number."""
    steps: dict[int, list[Step]] = {run.pk: [] for run in runs}
    agent_steps = []
    for step in steps_in_order(run_id__in=list(steps)):
        steps[step.run_id].append(step)
        if step.kind == AGENT:
            agent_steps.append(step)
    if agent_steps:
        # The current generation's (a re-run's earlier ones are history, not acted on).
        current = F("step__generation")
        prefetch_related_objects(agent_steps, Prefetch(
            "tool_calls", queryset=ToolCall.objects.filter(generation=current)))
        newest = dict(AgentTurn.objects.filter(step__in=agent_steps, generation=current)
                      .values("step_id")
                      .annotate(newest=Max("index")).values_list("step_id", "newest"))
        for step in agent_steps:
            step.newest_turn = newest.get(step.pk, 0)
    return steps


class RunDetail:
    """A run, its steps and (read when first asked for) the outline of its audit log."""

    def __init__(self, run: Run, steps: list[Step]):
        self.run, self.steps = run, steps

    @cached_property
    def audit(self) -> list[AuditRecord]:
        """The newest record of each (step, action), in seq order, as unsaved records
        holding seq, action and step_name: all the investigation card cites (the newest
        record of a kind). One query, which reads the run's whole log: the run page's poll
        and its timeline's pages, which show no card, never ask it (a run of 100,000
        records aggregated them all at every poll)."""
        outline = (AuditRecord.objects.filter(run=self.run).values("step_name", "action")
                   .annotate(newest=Max("seq")).order_by("newest"))
        return [AuditRecord(run=self.run, seq=row["newest"], action=row["action"],
                            step_name=row["step_name"]) for row in outline]


def run_row(run_id: int) -> Run:
    """A run's row alone: its page's poll tells from it (and a few small reads) whether the
    page is unchanged, without reading a step (console.live_versions)."""
    return Run.objects.get(pk=run_id)


def run_detail(run: Run) -> RunDetail:
    """A run with its steps, one query (three with an agent step), and the outline of its
    audit log when it is asked for (RunDetail.audit). The records in full are read a page
    at a time, for the timeline (console.timeline)."""
    # With an agent step's calls and newest turn prefetched (two more queries): each action
    # the page offers reads them, and would read them again one query each.
    return RunDetail(run=run, steps=steps_of([run])[run.pk])


def is_final(run: Run) -> bool:
    return run.status in FINAL_RUN_STATUSES
