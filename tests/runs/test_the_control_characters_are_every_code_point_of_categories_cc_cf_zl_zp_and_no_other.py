"""The one list of the characters a name may not hold (storable.CONTROL_CHARACTER_RANGES:
what has_control_characters and written_visibly read, and what the API document's patterns
are written from) is every code point of Unicode categories Cc, Cf, Zl and Zp in this
Python's Unicode, and no other. It is written out, not computed at import; a Python with a
newer Unicode version (one that adds format characters) fails here, telling whoever upgrades
to bring the list in line."""

import sys
import unicodedata

import pytest

from runs.machine.storable import (
    CONTROL_CHARACTER_RANGES,
    has_control_characters,
    written_visibly,
)

CATEGORIES = ("Cc", "Cf", "Zl", "Zp")


def test_the_list_is_every_code_point_of_the_categories_in_this_pythons_unicode():
    listed = {code for first, last in CONTROL_CHARACTER_RANGES for code in range(first, last + 1)}
    of_the_categories = {code for code in range(sys.maxunicode + 1)
                         if unicodedata.category(chr(code)) in CATEGORIES}
    version = f"Unicode {unicodedata.unidata_version}"
    assert [f"U+{code:04X}" for code in sorted(of_the_categories - listed)] == [], \
        f"{version}: of categories {CATEGORIES}, missing from CONTROL_CHARACTER_RANGES"
    assert [f"U+{code:04X}" for code in sorted(listed - of_the_categories)] == [], \
        f"{version}: in CONTROL_CHARACTER_RANGES, of none of the categories {CATEGORIES}"


def test_each_range_is_whole_in_order_and_apart_from_the_next():
    assert all(first <= last for first, last in CONTROL_CHARACTER_RANGES)
    # Apart: two that touch would be one, and the patterns written from them longer.
    assert all(last + 1 < following for (_, last), (following, _) in
               zip(CONTROL_CHARACTER_RANGES, CONTROL_CHARACTER_RANGES[1:], strict=False))


def test_a_text_holds_a_control_character_exactly_when_unicodedata_says_one_of_its_is():
    assert [f"U+{code:04X}" for code in range(sys.maxunicode + 1)
            if has_control_characters(f"a{chr(code)}b")
            != (unicodedata.category(chr(code)) in CATEGORIES)] == []


@pytest.mark.parametrize(("text", "holds"), [
    ("tenant-42:inv-1847", False), ("ключ-🔑-客户", False), ("a\u00a0b", False),
    ("a\nb", True), ("\x1b[2K", True), ("a\u202eb", True), ("a\u2028b", True),
    # Format characters a hand-written list of the API document's once missed.
    ("a\u0600b", True), ("a\u06ddb", True), ("a\u180eb", True), ("a\U000110bdb", True),
    ("a\U000e0041b", True), ("a\U000e0001b", True),
    # Unassigned, in a block of format characters: no category of the four.
    ("a\u2065b", False),
])
def test_each_example_holds_a_control_character_or_not(text, holds):
    assert has_control_characters(text) is holds


def test_written_visibly_writes_out_every_listed_character_but_those_kept():
    assert written_visibly("a\u202eb\U000e0041\tc\u2065") == "a\\u202eb\\ue0041\\u0009c\u2065"
    assert written_visibly("a\tb\u200b", keep="\t", form="<U+{:04X}>") == "a\tb<U+200B>"
