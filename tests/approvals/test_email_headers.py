"""Values reach a mail header only as one line without control characters."""

import pytest

from approvals.email_headers import header_text


@pytest.mark.parametrize("value, expected", [
    ("tenant-1:inv-1\r\nBcc: evil@example.com", "tenant-1:inv-1 Bcc: evil@example.com"),
    ("a\nb\rc\td\x00e\x1bf\x7fg", "a b c d e f g"),
    ("left\u2028right\u2029end", "left right end"),
    ("invoice \u202egnp.exe", "invoice gnp.exe"),
    ("  spaced   out  ", "spaced out"),
    ("Zoë: naïve café, 東京", "Zoë: naïve café, 東京"),
])
def test_header_text_turns_control_characters_into_spaces_and_keeps_the_rest(value, expected):
    assert header_text(value) == expected


def test_header_text_cuts_to_the_limit():
    assert header_text("approval needed: " + "x" * 400, limit=300) == \
        ("approval needed: " + "x" * 400)[:300]
