"""The runs list's own pieces: its page cursor in a URL, the link back to it with a query,
and the "N new" bar that polls for runs that started matching after the page was drawn."""

import json
from datetime import datetime

from django.urls import reverse
from django.utils.http import MAX_URL_REDIRECT_LENGTH

from approvals.bulk import bulk_refusal
from runs.definitions import definition
from runs.machine.storable import text_problem, whole_number
from runs.models import Workflow
from runs.operator.actions import ACTIONS
from runs.reads import selectors
from runs.reads.cursors import parse_stamp

# The actions the list offers for every run a filter matches (a bulk job).
BULK_BY_FILTER = [a for a in ACTIONS.values() if bulk_refusal(a) is None]


def encode_cursor(cursor: tuple | None) -> str:
    """A page cursor (the sort columns' values of the last row shown) for a URL."""
    if cursor is None:
        return ""
    return json.dumps([v.isoformat() if isinstance(v, datetime) else v for v in cursor],
                      separators=(",", ":"))


def decode_cursor(value: str, sort: str) -> tuple | None:
    """The cursor `value` carries for the order `sort`, or None (first page) when it is
    not one: a hand-edited or stale link starts over rather than failing."""
    if not value:
        return None
    columns, _ = selectors.sort_columns(sort)
    try:
        raw = json.loads(value)
    except ValueError:
        return None
    if not isinstance(raw, list) or len(raw) != len(columns):
        return None
    cursor = []
    for column, item in zip(columns, raw, strict=True):
        if column.endswith("_at"):
            when = parse_stamp(item) if isinstance(item, str) else None
            if when is None:
                return None
            cursor.append(when)
        elif column == "id":
            if not isinstance(item, int) or isinstance(item, bool):
                return None
            cursor.append(item)
        elif isinstance(item, str) and text_problem(item) is None:
            # Text the database cannot hold (NUL, a lone surrogate) is in no row's column.
            cursor.append(item)
        else:
            return None
    return tuple(cursor)


def whole_numbers(texts) -> list[int]:
    """The ids among `texts` (a list's row ids, a form's runs): the others are no id."""
    return [n for n in map(whole_number, texts) if n is not None]


def shown_ids(value: str) -> list[int]:
    """The ids of the runs a page shows, as its "new runs" poll sends them back."""
    return whole_numbers(value.split(","))[:200]


def sort_links(query, sort: str) -> dict[str, dict]:
    """For each sortable column of the list, the link that sorts by it (descending first,
    then flipping) and the arrow of the current order: the list's other parameters kept."""
    current = sort.lstrip("-")
    descending = sort.startswith("-")
    links = {}
    for name in selectors.SORTS:
        params = query.copy()
        params.pop("after", None)
        params["sort"] = name if (name == current and descending) else f"-{name}"
        links[name] = {"href": f"?{params.urlencode()}",
                       "arrow": ("↓" if descending else "↑") if name == current else "",
                       "aria": ("descending" if descending else "ascending")
                       if name == current else "none"}
    return links


def fits_in_link(query: str, *, page: str = "console:runs") -> bool:
    """Whether `page`'s URL with the query string `query` is one Django redirects to (it
    refuses a URL over MAX_URL_REDIRECT_LENGTH characters with a 400, and a line break in a
    header with a 500: a query comes back from a posted form as any text)."""
    return (len(f"{reverse(page)}?{query}") <= MAX_URL_REDIRECT_LENGTH
            and not any(c in query for c in "\r\n\x00"))


def list_url(query: str) -> str:
    """The runs list with the query string `query`: the way back after a change. A query too
    long for a link is dropped (the list alone), since the change it followed is made."""
    return f"{reverse('console:runs')}?{query}" if query and fits_in_link(query) \
        else reverse("console:runs")


def workflow_problem(text: str, workflow_ids) -> str | None:
    """Why the runs list's workflow filter `text` can match no run the person sees, or
    None: a misspelt name would otherwise read as "no run matches", where the API
    (api.selectors.workflow_filter_problem) and manage.py list_runs
    (console.cli.workflow_filter_matches) refuse it naming the workflows. `workflow_ids`:
    those whose runs the person may see, None for all (then a workflow the code registers
    counts before its first run, as for the command line). Only those are asked and
    named."""
    part = text.strip()
    if not part:
        return None
    rows = Workflow.objects.all() if workflow_ids is None \
        else Workflow.objects.filter(pk__in=workflow_ids)
    names = {*rows.values_list("name", flat=True),
             *(definition.registry.names() if workflow_ids is None else ())}
    if any(part.casefold() in name.casefold() for name in names):
        return None
    return (f"no workflow whose runs you may see has a name containing {part!r} (yours: "
            f"{', '.join(sorted(names)) or 'none'})")
