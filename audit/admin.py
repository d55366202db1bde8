"""What every admin page of a table that grows with runs shares: a page that costs the same
at a thousand rows and at a million (no full count, no DISTINCT over the table for a
filter's choices), and read-only admins for evidence. The admins of the audit records and of
the access chain are in runs.admin, where the console's search of runs and the indexed
search (runs.admin_search, which reads numbers as runs does) are at hand."""

import json
import re
from datetime import datetime
from math import ceil

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import build_q_object_from_lookup_parameters, prepare_lookup_value
from django.contrib.admin.views.main import ORDER_VAR, PAGE_VAR, SEARCH_VAR, ChangeList
from django.core.exceptions import EmptyResultSet, FieldError, FullResultSet, ValidationError
from django.core.paginator import Paginator
from django.db import DataError, OperationalError, connection, connections, transaction
from django.db.models import CharField, Value
from django.db.models.lookups import Regex
from django.db.models.sql.where import WhereNode
from django.http import HttpResponseRedirect
from django.utils.functional import cached_property

from .given_times import askable_as_given
from .models import StoredCheckpoint

# Up to this many rows a list counts exactly; past it, it shows the planner's estimate.
COUNT_CAP = 1000


def estimated_count(queryset) -> int:
    """How many rows `queryset` has: exact up to COUNT_CAP (a count that stops at COUNT_CAP
    + 1 rows, an index range at worst), PostgreSQL's estimate beyond. The estimate is the
    planner's row count for the query (EXPLAIN, which reads no row): close enough to say
    "about a million" and to number the pages, where an exact count of a million runs cost
    the admin's runs list 200 ms on every load."""
    queryset = queryset.order_by()
    exact = queryset[: COUNT_CAP + 1].count()
    # The estimate needs a plan in JSON (PostgreSQL's EXPLAIN; audit sits below runs.store,
    # so it asks Django what the database can explain rather than which database it is).
    if exact <= COUNT_CAP or "JSON" not in connection.features.supported_explain_formats:
        return exact if exact <= COUNT_CAP else queryset.count()
    plan = json.loads(queryset.explain(format="json"))
    return max(COUNT_CAP + 1, int(plan[0]["Plan"]["Plan Rows"]))


def listed_pages(per_page: int) -> int:
    """How many pages of `per_page` rows a list offers at most: those holding its first
    COUNT_CAP rows, the rows it counts exactly. A page is read with OFFSET, which walks every
    row before it along the index: the last page of a million runs read the whole index, on
    every request for it. Rows past these are reached by a filter or a search."""
    return max(1, ceil(COUNT_CAP / per_page))


class EstimatedCountPaginator(Paginator):
    """Counts as estimated_count does and numbers only the listed_pages: the pager links no
    page past them, and asking for one raises EmptyPage before any row is read."""

    @cached_property
    def count(self) -> int:
        return estimated_count(self.object_list)

    @cached_property
    def num_pages(self) -> int:
        return min(super().num_pages, listed_pages(self.per_page))

    @property
    def unlisted_rows(self) -> bool:
        """Whether rows lie past the last listed page (the pager says how to reach them)."""
        return self.count > self.num_pages * self.per_page


# Said when a list's address asks for a page past listed_pages.
PAGE_REFUSED = ("Page {asked:,} of this list was not read: a list shows its first {pages:,} "
                "pages ({rows:,} rows) only. Narrow the list with a filter or a search to "
                "reach the rows past them.")
# Said when it asks for a page that is not a whole number from 1 (its first page is shown).
NOT_A_PAGE = "There is no page \"{asked}\" of this list: its pages are numbered from 1."
# Said when it asks for a page past the last of a list all of whose rows the pages hold.
PAST_THE_LAST_PAGE = "There is no page {asked:,} of this list: its last page is {pages:,}."


def page_asked(params) -> int | None:
    """The page a list's address asks for, read as Django's changelist reads it (1 when it
    names none); None when it names no page: not a whole number, or one below 1."""
    try:
        asked = int(params.get(PAGE_VAR, 1))
    except ValueError:
        return None
    return asked if asked >= 1 else None


class PageNotInList(Exception):
    """A list's address asks for a page the list does not have. `page` is the page shown
    instead (None: the first)."""

    def __init__(self, message: str, page: int | None = None):
        super().__init__(message)
        self.page = page


def storable(value) -> bool:
    """Whether a column could hold `value`, a filter's value as Django's lookups prepared it:
    text without a NUL, an integer within a bigint, a time the database can be asked about as
    it is written (audit.given_times.askable_as_given: in the calendar in UTC, with an offset
    PostgreSQL takes)."""
    if isinstance(value, str):
        return "\x00" not in value  # PostgreSQL holds no NUL in text (NUL_FILTER_REFUSED)
    if isinstance(value, int) and not isinstance(value, bool):
        # The widest integer column's range, as Django's backend for the database knows it.
        low, high = connection.ops.integer_field_range("BigIntegerField")
        return low <= value <= high
    if isinstance(value, datetime):
        return askable_as_given(value)
    return True


def lookups(node):
    """The lookups of a query's WHERE `node`."""
    for child in node.children:
        if isinstance(child, WhereNode):
            yield from lookups(child)
        else:
            yield child


def lookup_values(node):
    """The values the lookups of a query's WHERE `node` compare their columns with."""
    for lookup in lookups(node):
        value = getattr(lookup, "rhs", None)
        yield from value if isinstance(value, (list, tuple, set, frozenset)) else [value]


def patterns_read(query, using: str) -> bool:
    """Whether the database reads the pattern of each regex or iregex lookup of `query` (a
    malformed one is refused only as rows are matched: a server error on either database).
    The database judges it, as its own engine is the one that reads it: PostgreSQL's reads
    no named group nor a bound past 255, SQLite's (Python's re) no \\y nor a director. The
    same lookup, matched against an empty text instead of the column, reads no row."""
    patterns = [type(lookup)(Value("", output_field=CharField()), lookup.rhs)
                for lookup in lookups(query.where) if isinstance(lookup, Regex)]
    if not patterns:
        return True
    compiler = query.get_compiler(using=using)
    parts = [pattern.as_sql(compiler, compiler.connection) for pattern in patterns]
    try:
        # Its own savepoint: a refused statement spoils no transaction the request is in.
        with transaction.atomic(using=using), connections[using].cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(sql for sql, _ in parts),
                           [param for _, params in parts for param in params])
    except DataError:  # PostgreSQL's invalid_regular_expression
        return False
    except OperationalError:
        # SQLite's engine is Python's re, run as a function the database calls: a pattern
        # it cannot read comes back as that function's failure. Where Python's re reads
        # every pattern, the error is not theirs (a connection lost or shut down): the page
        # fails as any would.
        if all(python_reads(str(lookup.rhs)) for lookup in patterns):
            raise
        return False
    return True


def python_reads(pattern: str) -> bool:
    """Whether Python's re compiles `pattern` (the engine of SQLite's REGEXP in Django)."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError):
        return False
    return True


# Said when a list's address filters on values no row can hold.
FILTER_REFUSED = ("No row of this list can hold {filters}: the list is shown without "
                  "{that}.")
# Said when a list's address filters by a regular expression the database cannot read.
PATTERN_REFUSED = ("This list cannot be filtered by {filters}: {is_} not a regular expression "
                   "the database reads. The list is shown without {that}.")


def refusal(queryset, lookup: str, values: list[str]) -> str | None:
    """Why no row of `queryset` could match the filter `lookup` with `values`, as an address
    gives them: the message saying so (None: one could). FILTER_REFUSED when a value is not
    of its column's kind ("abc" for an id) or is past what any column holds (an integer past
    a bigint, a time past the year 9999 in UTC): Django's lookups hand such a value on to the
    database, and SQLite, the demo's, refuses it as the list is counted (OverflowError, a
    server error), PostgreSQL finds no row. PATTERN_REFUSED for a regular expression the
    database cannot read (patterns_read). A parameter that names no column (a list filter's
    own) is not judged here: None."""
    try:
        query = queryset.filter(build_q_object_from_lookup_parameters(
            {lookup: prepare_lookup_value(lookup, values)})).query
    except (ValueError, ValidationError, OverflowError):
        return FILTER_REFUSED
    except FieldError:
        return None
    if not all(storable(value) for value in lookup_values(query.where)):
        return FILTER_REFUSED
    # Some values fail only as the query is written: a year's bounds (a time past 9999), a
    # time SQLite is given in UTC, a range of one value. Writing it reads no row, and Django
    # itself takes any error of an address's filter for a bad value (ChangeList.get_queryset).
    try:
        query.get_compiler(using=queryset.db).as_sql()
    except (EmptyResultSet, FullResultSet):
        pass
    except Exception:
        return FILTER_REFUSED
    return None if patterns_read(query, queryset.db) else PATTERN_REFUSED


def holdable(queryset, lookup: str, values: list[str]) -> bool:
    """Whether a row of `queryset` could match the filter `lookup` with `values` (refusal)."""
    return refusal(queryset, lookup, values) is None


def shown(value: str) -> str:
    """A value as typed into an address, quoted and cut short, for a message (kept in a
    cookie)."""
    return repr(value if len(value) <= 20 else f"{value[:20]}…")


# Said when it asks the date hierarchy for a year, month or day it cannot bound.
DATE_REFUSED = ("This list cannot be filtered by the date {filters}: a date filter reads up "
                "to the start of the year, month or day after it, which must fall between "
                "the years 1 and 9999. The list is shown without it.")
# Said when an action is asked for on a selection naming what no row has as its id.
SELECTION_REFUSED = ("Nothing was done: the selection named no row of this list ({values} "
                     "{is_} no id a row can have).")


class FiltersRefused(Exception):
    """A list's address filters on what no row can hold. `names` are the refused
    parameters, which the list is shown without."""

    def __init__(self, message: str, names):
        super().__init__(message)
        self.names = list(names)


class PageCheckedChangeList(ChangeList):
    """A changelist that raises PageNotInList for a page it does not have. Django reads a
    page it cannot parse as the first, shows a one-page list whatever page is asked, and
    answers a page out of a longer list's range by sending to the list with its filters
    dropped, then, asked again, with its "Database error" page. It raises FiltersRefused for
    a filter no row can hold (holdable), before any row is read."""

    def get_filters(self, request):
        try:
            filters = super().get_filters(request)
        except (ValueError, OverflowError):
            # Django's date hierarchy bounds a year, month or day by the next one and catches
            # only a date it cannot make, not a next one past the year 9999.
            hierarchy = [f"{self.date_hierarchy}__{part}" for part in ("year", "month", "day")]
            asked = [name for name in hierarchy if name in self.params]
            if not self.date_hierarchy or not asked:
                raise
            raise FiltersRefused(DATE_REFUSED.format(filters=", ".join(
                f"{name}={shown(self.params[name])}" for name in asked)), hierarchy) from None
        refused = {}  # each message, with the filters it refuses
        for name, values in self.get_filters_params().items():
            if message := refusal(self.root_queryset, name, values):
                refused.setdefault(message, []).append((name, values))
        if refused:
            raise FiltersRefused(" ".join(message.format(
                filters=", ".join(f"{name}={shown(values[-1])}" for name, values in named),
                is_="is" if len(named) == 1 else "are",
                that="that filter" if len(named) == 1 else "those filters")
                for message, named in refused.items()),
                [name for named in refused.values() for name, _ in named])
        return filters

    def get_results(self, request):
        if page_asked(request.GET) is None:
            # A value as typed into the address, cut short: the message is kept in a cookie.
            asked = request.GET[PAGE_VAR]
            raise PageNotInList(NOT_A_PAGE.format(
                asked=asked if len(asked) <= 20 else f"{asked[:20]}…"))
        try:
            super().get_results(request)
        except IncorrectLookupParameters:
            # Django's only refusal here: the paginator found the page out of range, before
            # reading a row. Counted again (COUNT_CAP rows at most on a growing table) to
            # say which pages the list has.
            paginator = self.model_admin.get_paginator(request, self.queryset,
                                                       self.list_per_page)
            if self.page_num <= paginator.num_pages:
                raise
        else:
            paginator = self.paginator
        if self.page_num > paginator.num_pages:
            if getattr(paginator, "unlisted_rows", False):
                raise PageNotInList(PAGE_REFUSED.format(
                    asked=self.page_num, pages=paginator.num_pages,
                    rows=paginator.num_pages * self.list_per_page))
            raise PageNotInList(PAST_THE_LAST_PAGE.format(
                asked=self.page_num, pages=paginator.num_pages), page=paginator.num_pages)


# Said when a list's address filters on a NUL: no column can hold one.
NUL_FILTER_REFUSED = ("A filter of this list held a NUL character, which no stored value can "
                      "hold; the list is shown without its filters.")


def nul_parameters(params) -> list[str]:
    """The names of the list parameters (other than the search, which each admin's search
    answers itself) whose name or value holds a NUL character."""
    return sorted({name for name, values in params.lists() if name != SEARCH_VAR
                   and ("\x00" in name or any("\x00" in value for value in values))})


class StorableFiltersAdmin(admin.ModelAdmin):
    """The base of every admin list here: a hand-edited address gets a list and a message
    saying what was wrong with it, never an error page. A filter on a NUL character is
    refused (Django admin takes any field of the model as a filter from the address,
    `?status=...`, and PostgreSQL refuses a NUL in a text parameter: a server error), and a
    page the list does not have is answered with its first page, or its last for a page
    past it, the list's filters and search kept (PageCheckedChangeList). A filter on what no
    row can hold (an id past a bigint, a time past the year 9999, "abc" for a number) is
    answered with the list without it (FiltersRefused), and an action on a selection naming
    no row's id does nothing (response_action)."""

    def get_changelist(self, request, **kwargs):
        return PageCheckedChangeList

    def changelist_view(self, request, extra_context=None):
        if nul_parameters(request.GET):
            self.message_user(request, NUL_FILTER_REFUSED, messages.ERROR)
            return HttpResponseRedirect(request.path)
        try:
            return super().changelist_view(request, extra_context)
        except PageNotInList as refused:
            self.message_user(request, str(refused), messages.ERROR)
            params = request.GET.copy()
            params.pop(PAGE_VAR)
            if refused.page and refused.page > 1:
                params[PAGE_VAR] = str(refused.page)
        except FiltersRefused as refused:
            self.message_user(request, str(refused), messages.ERROR)
            params = request.GET.copy()
            # The page was one of the filtered list.
            for name in [*refused.names, PAGE_VAR]:
                params.pop(name, None)
        query = params.urlencode()
        return HttpResponseRedirect(request.path + (f"?{query}" if query else ""))

    def response_action(self, request, queryset):
        # Django filters the list by the selection as it is sent (pk__in), and the action
        # reads it: a value no id can be was a server error (ValueError, or SQLite's
        # OverflowError).
        unheld = [value for value in request.POST.getlist(ACTION_CHECKBOX_NAME)
                  if not holdable(queryset, "pk", [value])]
        if unheld:
            self.message_user(request, SELECTION_REFUSED.format(
                values=", ".join(shown(value) for value in unheld),
                is_="is" if len(unheld) == 1 else "are"), messages.ERROR)
            return None
        return super().response_action(request, queryset)


class IndexedOrderChangeList(PageCheckedChangeList):
    """A changelist sorted only by the columns its admin's `sortable_by` names. Django links
    only those headers, but sorts by any column an address names (`?o=3`): a sort by a column
    no index holds in order reads and sorts the whole table. The address's other columns are
    left out; naming none of the sortable ones, it gets the list's own order."""

    def get_ordering(self, request, queryset):
        asked = self.params.pop(ORDER_VAR, "")
        kept = ".".join(part for part in asked.split(".") if self.sorts_by(part))
        if kept:
            self.params[ORDER_VAR] = kept
        return super().get_ordering(request, queryset)

    def sorts_by(self, part: str) -> bool:
        """Whether `part` of an address's order ("-3": the fourth column, descending) names
        a column this list may be sorted by."""
        index = part.removeprefix("-")
        if not (index.isascii() and index.isdigit()) or int(index) >= len(self.list_display):
            return False
        return self.sortable_by is None or self.list_display[int(index)] in self.sortable_by


class FastListAdmin(StorableFiltersAdmin):
    """A changelist read along an index: no full count of the table on each load (Django's
    show_full_result_count off, and a paginator that estimates past COUNT_CAP rows), sorted
    only by the columns an index holds in order (`sortable_by`: none unless a subclass names
    them), and subclasses give filters whose choices come from a small table or a fixed
    list. No counts beside the filters' choices (Django's facets, its "Show counts" link or
    `?_facets=True`): each filter's counts were one COUNT over the whole filtered table, the
    runs list's workflow filter reading every run four times over. Pages past listed_pages
    are refused, no page read, with a message saying to filter or search (PAGE_REFUSED)."""

    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = EstimatedCountPaginator
    list_per_page = 50
    sortable_by = ()

    def get_changelist(self, request, **kwargs):
        return IndexedOrderChangeList


class ReadOnlyAdmin(FastListAdmin):
    """For records that only their own code may write: admins look, never add, edit or
    delete (the audit trail, runs that change only through transitions, a ledger)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def choices_filter(title: str, field: str, values) -> type[admin.SimpleListFilter]:
    """A list filter on `field` whose choices are `values` (a fixed list, or a function
    returning one, read from a small table), never a DISTINCT over the filtered table."""

    class ChoicesFilter(admin.SimpleListFilter):
        parameter_name = field

        def lookups(self, request, model_admin):
            return [(v, v) for v in (values() if callable(values) else values)]

        def queryset(self, request, queryset):
            value = self.value()
            return queryset.filter(**{field: value}) if value else queryset

    ChoicesFilter.title = title
    return ChoicesFilter


@admin.register(StoredCheckpoint)
class StoredCheckpointAdmin(ReadOnlyAdmin):
    """The checkpoints beat stored outside the database, newest first: what `audit_checkpoint
    check` reads. Written only by audit.checkpoints; a few a day."""

    list_display = ["taken_at", "name", "chains"]
    ordering = ["-taken_at"]
    sortable_by = ["taken_at"]
    search_fields = ["name"]
