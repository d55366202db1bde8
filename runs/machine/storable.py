"""Text PostgreSQL can store: its text and jsonb types refuse NUL characters, and text that
is not Unicode (a lone surrogate, which is how Python hands over bytes that were not UTF-8)
fails to encode. Every entry point checks what it is given with this one rule, before
anything is written, and names the problem instead of failing in the database."""

NUL = "\x00"
NUL_PROBLEM = "NUL characters cannot be stored"
SURROGATE_PROBLEM = "not valid Unicode text (a lone surrogate)"


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored, or None if it can."""
    if NUL in text:
        return NUL_PROBLEM
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return SURROGATE_PROBLEM
    return None
