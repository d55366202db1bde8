"""A malformed ARCHIVE_SIGNING_KEYS / FIELD_ENCRYPTION_KEYS entry is refused naming its
position and what is wrong with it, never its text: the text may be a secret (a key pasted
without its id, or next to an empty one)."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.settings import key_ring

SECRET = "Zm9vYmFyYmF6cXV4S2V5TWF0ZXJpYWw"


@pytest.mark.parametrize(("raw", "position", "problem"), [
    (f"k1:good,{SECRET}", 2, "has no ':' between its id and its secret"),
    (f":{SECRET}", 1, "has an empty id"),
    (f"{SECRET}:", 1, "has an empty secret"),
    (f"k1:{SECRET},", 2, "is empty"),
    # Read as one, the later secret would silently replace the key in use.
    (f"k1:{SECRET},k2:old,k1:other", 3, "repeats the id 'k1' of an earlier entry"),
])
def test_a_malformed_entry_is_named_by_position_without_its_text(raw, position, problem):
    with pytest.raises(ImproperlyConfigured) as refused:
        key_ring("FIELD_ENCRYPTION_KEYS", raw, "fields")
    message = str(refused.value)
    assert f"FIELD_ENCRYPTION_KEYS: entry {position} " in message
    assert problem in message
    assert SECRET not in message


def test_well_formed_entries_make_the_ring():
    assert key_ring("ARCHIVE_SIGNING_KEYS", f" k2:{SECRET} , k1:old ", "archive") == {
        "k2": SECRET, "k1": "old"}
