"""A record's before, after and data are hashed as a jsonb column gives them back, so that
the record read later hashes the same. `as_stored` makes that value in the process: here it
is compared with what PostgreSQL itself gives back, for the values records carry (text,
choices, whole numbers, lists, nested objects) and for those the database rewrites (floats,
dates, keys that are no text)."""

import enum
import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection

from audit.chain import as_stored
from runs.models import StepStatus


class Colour(enum.IntEnum):
    RED = 1


VALUES = [
    {"step_status": StepStatus.RUNNING, "remote_ref": "", "attempt": 3, "done": True,
     "gone": None},
    {"lines": [{"sku": "A-1", "qty": 2}, ("t", "u")], "note": "naïve \u2028 \x07 text"},
    {"amount": 345.48, "ratio": 1e16, "neg": -0.0, "tiny": 1.5e-7},
    {"when": datetime(2026, 12, 5, 7, 48, tzinfo=UTC), "price": Decimal("10.50")},
    {1: "one", None: "none"},
    {"colour": Colour.RED, "big": 2**80},
    [],
    "just text",
]


def _hashed_text(value) -> str:
    # As audit.chain.record_hash writes a value into the text it hashes.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _as_the_database_gives_it_back(value):
    # As a JSONField reads the column when verify_audit hashes the record again.
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb::text", [json.dumps(value, default=str)])
        return json.loads(cursor.fetchone()[0])


@pytest.mark.django_db
@pytest.mark.parametrize("value", VALUES)
def test_a_value_is_made_as_its_jsonb_column_gives_it_back(value):
    made = as_stored(value)

    assert _hashed_text(made) == _hashed_text(_as_the_database_gives_it_back(value))


def test_a_choice_is_kept_as_its_text_and_a_tuple_as_a_list():
    made = as_stored({"step_status": StepStatus.SUCCEEDED, "pair": ("a", 1)})

    assert type(made["step_status"]) is str
    assert made == {"step_status": "succeeded", "pair": ["a", 1]}


def test_the_value_made_is_a_copy_a_later_change_to_the_original_leaves_alone():
    original = {"lines": [{"qty": 1}], "note": "x"}
    made = as_stored(original)

    original["lines"][0]["qty"] = 99
    original["note"] = "changed"

    assert made == {"lines": [{"qty": 1}], "note": "x"}
