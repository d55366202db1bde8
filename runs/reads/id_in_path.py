"""A row's id as one segment of a URL path (a run's, an agent turn's, an approval request's,
a bulk job's, a saved view's), the one way the console and the approvals pages read it: the
path converter `id`, registered here, once. A URL module that uses `<id:...>` imports this
module.

Django's `int` converter passes any number of digits. An id past what a bigint holds then
reached the views, whose lookups SQLite (the demo's database) refuses with an OverflowError
where PostgreSQL finds no row: on the demo, the run page, its investigation, its transcripts
and every action answered 500. No row has such an id, so no page is found."""

from django.db import connection
from django.urls import register_converter

from ..machine.storable import whole_number

# The largest id a row can have, as Django's backend for the database knows it (PostgreSQL's
# bigint, SQLite's integer: 2**63 - 1).
LARGEST_ID = connection.ops.integer_field_range("BigAutoField")[1]


class IdInPath:
    """A row's id: ASCII digits (runs.machine.storable.whole_number), up to LARGEST_ID; any
    other number names no row, and the address is not found."""

    regex = r"[0-9]+"

    def to_python(self, value: str) -> int:
        number = whole_number(value, digits=len(str(LARGEST_ID)))
        if number is None or number > LARGEST_ID:
            raise ValueError(f"no row has the id {value[:40]}")  # no match: not found
        return number

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdInPath, "id")
