"""The API document's pattern for a start's business key refuses exactly the control and
format characters the start refuses (storable.CONTROL_CHARACTER_RANGES, Unicode categories
Cc, Cf, Zl and Zp), where a pattern can name them in every dialect it is read in: up to
U+FFFF, as \\uXXXX. It was a list of its own, written by hand: it let through format
characters the start refuses (U+0600-U+0605, U+06DD, U+070F, U+0890, U+08E2, U+180E), and
refused U+2065, unassigned, which the start takes; a client generated from the document
met a 422 it did not say, or was kept from sending a key the start takes. Above U+FFFF,
where no spelling of a code point is read by every reader (\\u{...} is an error to Python's
re and to ECMA-262 without its u flag, a surrogate pair to the Rust regex crate and
jsonschema-rs), the document's description names them, and the start refuses them."""

import re

import jsonschema_rs
import pytest

from api.routes import api
from api.schemas import LEFT_TO_THE_START
from runs.machine.storable import CONTROL_CHARACTER_RANGES, has_control_characters
from runs.models import Run
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db


def documented_key() -> dict:
    """The business key as the served document gives every start (one alternative per
    workflow, all alike)."""
    components = api.get_openapi_schema()["components"]["schemas"]
    keys = [schema["properties"]["business_key"]
            for name, schema in components.items() if name.endswith(".start")]
    assert keys and all(key == keys[0] for key in keys)
    return keys[0]


def test_the_pattern_writes_each_code_point_as_every_dialect_reads_it():
    pattern = documented_key()["pattern"]
    # Every escape is \uXXXX (or a blank's, alike): none that one reader reads and another not.
    assert set(re.findall(r"\\(.)", pattern)) == {"u"}
    assert re.findall(r"\\u(?![0-9a-f]{4})", pattern) == []


def test_the_pattern_refuses_a_character_up_to_uffff_exactly_when_the_start_does():
    pattern = documented_key()["pattern"]
    # The validator the contract test checks answers with, which reads ECMA-262.
    validator = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    surrogates = range(0xD800, 0xE000)
    python_re = [f"U+{code:04X}" for code in range(0x10000) if code not in surrogates
                 and (re.fullmatch(pattern, f"a{chr(code)}b") is None)
                 != has_control_characters(chr(code))]
    ecma = [f"U+{code:04X}" for code in range(0x10000) if code not in surrogates
            and (not validator.is_valid(f"a{chr(code)}b")) != has_control_characters(chr(code))]
    assert (python_re, ecma) == ([], [])


def test_what_the_pattern_leaves_to_the_start_is_named_in_the_description():
    key = documented_key()
    listed = {code for first, last in CONTROL_CHARACTER_RANGES for code in range(first, last + 1)}
    left = {code for first, last in LEFT_TO_THE_START for code in range(first, last + 1)}
    assert left == {code for code in listed if code > 0xFFFF}
    for first, last in LEFT_TO_THE_START:
        named = f"U+{first:04X}" if first == last else f"U+{first:04X}-U+{last:04X}"
        assert named in key["description"]
        assert re.fullmatch(key["pattern"], f"a{chr(first)}b")


@pytest.mark.parametrize(("key", "taken"), [
    ("k\u0600", False), ("k\u0605", False), ("a\u06ddb", False), ("k\u070f", False),
    ("k\u0890", False), ("k\u08e2", False), ("a\u180eb", False), ("k\u2064", False),
    ("k\u2065", True), ("a\u2065b", True), ("k\u2066", False),
    ("k\U000110bd", False), ("k\U0001d173", False), ("k\U000e0001", False),
    ("k\U000e0041", False),
])
def test_the_start_and_the_document_agree_on_each_format_character(api_client, key, taken):
    response = post_run(api_client, {"workflow": "test-orders", "business_key": key,
                                     "input": {"order": "o-1"}})

    assert response.status_code == (201 if taken else 422), response.content
    if not taken:
        assert response.json()["errors"][0]["msg"].startswith("contains control characters")
    assert list(Run.objects.values_list("business_key", flat=True)) == ([key] if taken else [])
    pattern = documented_key()["pattern"]
    if max(map(ord, key)) <= 0xFFFF:
        assert (re.fullmatch(pattern, key) is not None) is taken
    else:
        # Above U+FFFF the pattern takes it, and the description names it (the test above).
        assert re.fullmatch(pattern, key) is not None
        assert any(first <= ord(key[-1]) <= last for first, last in LEFT_TO_THE_START)
