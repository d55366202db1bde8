"""The API document's pattern for a start's business key says what the start refuses at the
key's ends: a blank (a space, a no-break space, an ideographic space, ... what the start's
str.strip() takes away, no more and no less), as well as the control characters it refuses
anywhere. It said only the control characters, so a key such as '\\u00a0PÊĪ' matched the
document and was answered 422: a client generated from the document, or a contract test,
met a refusal the document did not say. The start still refuses such a key in its own words
(tests/api/test_a_start_the_runtime_refuses_is_told_in_its_own_words.py)."""

import re
import sys

import pytest

from api.routes import api
from runs.machine.storable import BLANKS
from runs.models import Run
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db


def documented_pattern() -> str:
    """The pattern the served document gives every start's business key (one alternative
    per workflow, all alike)."""
    components = api.get_openapi_schema()["components"]["schemas"]
    patterns = {schema["properties"]["business_key"]["pattern"]
                for name, schema in components.items() if name.endswith(".start")}
    [pattern] = patterns
    return pattern


def documented(key: str) -> bool:
    return re.fullmatch(documented_pattern(), key) is not None


@pytest.mark.parametrize("key", [" tenant-42:inv-1847", "tenant-42:inv-1847 ",
                                 "\u00a0PÊĪ", "PÊĪ\u00a0", "\u3000k", "k\u3000", "\tk", "k\n",
                                 " ", "\u00a0"])
def test_a_key_with_a_blank_at_either_end_is_refused_by_the_documents_pattern(key):
    assert not documented(key)


@pytest.mark.parametrize("key", ["tenant-42:inv-1847", "k", "a b", "a\u00a0b", "a\u3000b",
                                 "café"])
def test_a_key_the_start_takes_is_accepted_by_the_documents_pattern(key):
    assert documented(key)


def test_a_blank_to_the_pattern_is_exactly_what_the_starts_strip_takes_away():
    everything = map(chr, range(sys.maxunicode + 1))
    blanks = re.compile(f"[{BLANKS}]")
    assert [c for c in everything if (blanks.fullmatch(c) is not None) != (c.strip() == "")] \
        == []


EDGES = [
    "k", "a b", "a\u00a0b", "a\u3000b", "a\u202fb",
    # Blanks to str.strip(): refused at either end.
    " k", "k ", "\u00a0k", "k\u00a0", "\u3000k", "k\u3000", "\u2007k", "k\u202f", "\u205fk",
    "k\u1680", "\u2000k",
    # Control characters: refused anywhere, blank or not.
    "\tk", "k\t", "a\tb", "k\u0085", "\u2028k", "a\u2029b", "\x1ck",
    # Not blanks to str.strip() but invisible format characters, refused anywhere.
    "\u200bk", "k\u200b", "a\u200bb", "\ufeffk", "k\u2060",
]


def test_the_documents_pattern_and_the_start_agree_on_each_edge_case(api_client):
    answers = {}
    for key in EDGES:
        response = post_run(api_client, {"workflow": "test-orders", "business_key": key,
                                         "input": {"order": "o-1"}})
        answers[key] = response.status_code
        assert response.status_code in (201, 422), response.content

    assert {key: documented(key) for key in EDGES} == {
        key: status == 201 for key, status in answers.items()}
    # What the start took, and nothing it refused.
    assert sorted(Run.objects.values_list("business_key", flat=True)) == sorted(
        key for key, status in answers.items() if status == 201)
    assert sorted(key for key, status in answers.items() if status == 201) == sorted(
        ["k", "a b", "a\u00a0b", "a\u3000b", "a\u202fb"])
