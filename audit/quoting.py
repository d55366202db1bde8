"""What a person gave (a step name, a file name), repeated in a message they read: quoted,
with every character that does not show itself written as its escape, and cut short. A name
holding a terminal's escape sequence or a line break, printed as it is, recolours the
terminal or forges a line of the message. Kept in the lowest layer so that the audit
commands and the runtime's refusals (runs.machine) hold it once."""

import os

# A path is cut after this many characters: more than the longest file name most file systems
# take, enough to tell it; a refusal of a 4,096-character path need not repeat it all.
FILE_NAME_SHOWN = 255


def quoted(text: str, *, limit: int = 120) -> str:
    """`text` quoted for a message that names what a person gave (a step name that names no
    step), cut to `limit` characters: a refusal repeats what was asked, not all of a
    90,000-character field into the session and the page. repr() writes each character that
    is not printable (controls, line breaks, bidi and zero-width format characters, a lone
    surrogate) as its escape, \\x1b or \\n or \\u202e, so the message shows what was given."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def file_name(path: str | os.PathLike) -> str:
    """The path `path` as every command names it in what it prints (a file it cannot open,
    one it wrote): quoted, as quoted() writes it."""
    return quoted(os.fspath(path), limit=FILE_NAME_SHOWN)
