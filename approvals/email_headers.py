"""Text that goes into an email header: one line, no control characters.

A header value with a line break ends the header and starts another (a business key
"k\\r\\nBcc: evil@example.com" would add a recipient), and Django refuses such a message
outright, so one bad value would make every notification of its run fail. Values that reach
a header are therefore built only through header_text: every control, format or
line-separator character (\\r, \\n, tab, NUL, bidi overrides, U+2028 ...) becomes a space,
runs of spaces collapse to one, and the rest is kept.
"""

import re
import unicodedata

_SPACES = re.compile(r" {2,}")


def _unsafe(char: str) -> bool:
    # Cc control, Cf format (bidi overrides that reorder what the reader sees), Cs/Co/Cn
    # surrogates, private use and unassigned, Zl/Zp line and paragraph separators.
    return unicodedata.category(char)[0] == "C" or unicodedata.category(char) in ("Zl", "Zp")


def header_text(value, *, limit: int | None = None) -> str:
    """`value` as one line of header-safe text, cut to `limit` characters if given."""
    text = "".join(" " if _unsafe(c) else c for c in str(value))
    text = _SPACES.sub(" ", text).strip()
    return text[:limit].rstrip() if limit is not None else text
