"""Admin search boxes that read along an index, for the admins of tables that grow (the
outbox, webhook deliveries, archived runs, the access chain).

Django's own search turns `=field` into UPPER(col::text) = UPPER('q') and a plain field into
UPPER(col::text) LIKE UPPER('%q%'): no index serves either, so each search read the whole
table. Here each searched column says how a term may match it, in a way its index answers:
a whole number (the term read by whole_number, so "٣" or "²" match nothing rather than run
3), a UUID, an IP address, the whole text, or the start of the text (along a
varchar_pattern_ops index).
A term that cannot be what a column holds is not compared with it, and a term that fits no
column finds nothing, without a query for its rows.
"""

import ipaddress
import operator
import uuid
from functools import reduce

from django.db.models import Q

from .machine.storable import whole_number

NUMBER = "number"
UUID = "uuid"
IP = "ip"
EXACT = "exact"
PREFIX = "prefix"

_SAYS = {NUMBER: "the whole {}", UUID: "the whole {}", IP: "the whole {}",
         EXACT: "the whole {}", PREFIX: "the start of {}"}


def column_match(field: str, how: str, q: str) -> Q | None:
    """The filter of the rows whose `field` matches the term `q` as `how` says, or None when
    `q` cannot be what the column holds."""
    if how == NUMBER:
        number = whole_number(q)
        return None if number is None else Q(**{field: number})
    if how == UUID:
        # uuid.UUID reads its hex through int(), which also reads non-ASCII digits.
        if not q.isascii():
            return None
        try:
            return Q(**{field: uuid.UUID(q)})
        except ValueError:
            return None
    if how == IP:
        # An inet column refuses (an error, not no row) a term that is no address.
        try:
            return Q(**{field: str(ipaddress.ip_address(q))})
        except ValueError:
            return None
    if how not in (EXACT, PREFIX):
        raise ValueError(f"unknown way of matching {how!r} for {field}")
    # PostgreSQL text holds no NUL, and psycopg refuses to send one: no row can match.
    if "\x00" in q:
        return None
    return Q(**{field: q}) if how == EXACT else Q(**{f"{field}__startswith": q})


def indexed_search(queryset, searched, q: str):
    """`queryset` narrowed to the rows one of the `searched` (field, how) pairs matches `q`
    for: an OR of conditions on one table's indexed columns, which PostgreSQL answers with
    one index scan per column (a BitmapOr), not by reading the table."""
    matches = [m for field, how in searched if (m := column_match(field, how, q)) is not None]
    if not matches:
        return queryset.none()
    return queryset.filter(reduce(operator.or_, matches))


class IndexedSearchAdmin:
    """A ModelAdmin mixin: `indexed_search` lists (field, how) pairs, how one of NUMBER,
    UUID, IP, EXACT or PREFIX, each an indexed column of the admin's own table."""

    indexed_search: tuple[tuple[str, str], ...] = ()
    # Django admin shows the search box only when search_fields is set; the fields are not
    # used (get_search_results below replaces Django's search).
    search_fields = ["-"]

    @property
    def search_help_text(self):
        def named(field: str) -> str:
            found = self.model._meta.get_field(field)
            return f"{found.verbose_name} id" if found.is_relation else found.verbose_name

        return "Finds " + ", or ".join(_SAYS[how].format(named(field))
                                       for field, how in self.indexed_search) + "."

    def get_search_results(self, request, queryset, search_term):
        q = search_term.strip()
        if not q:
            return queryset, False
        return indexed_search(queryset, self.indexed_search, q), False
