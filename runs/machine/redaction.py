"""Keep credentials out of checkpoints, audit records and logs."""

import re

REDACTED = "[redacted]"
_SECRET_KEY_NAMES = re.compile(
    r"pass(word)?|secret|token|api[-_]?key|authorization|cookie|credential|private[-_]?key",
    re.IGNORECASE,
)
_SECRET_IN_TEXT = re.compile(
    r"(?i)(bearer\s+|basic\s+)[A-Za-z0-9._~+/=-]+"
    r"|\bsk-[A-Za-z0-9_-]{8,}"
    r"|((?:password|secret|token|api[-_]?key)\s*[=:]\s*)[^\s&,;\"']+"
    # A URL's userinfo (scheme://user:password@host): the password, or a token standing
    # alone as the user, up to the last @ of the authority (a password may hold an @).
    r"|(\b[a-z][a-z0-9+.-]*://(?:[^\s/?#@:]*:)?)[^\s/?#]+(?=@)"
)


def redact_text(text: str) -> str:
    """The text with bearer tokens, API keys, key=value secrets and URLs' credentials
    masked."""

    def mask(match: re.Match) -> str:
        prefix = match.group(1) or match.group(2) or match.group(3) or ""
        return f"{prefix}{REDACTED}"

    return _SECRET_IN_TEXT.sub(mask, text)


def redact(value, *, keep=None):
    """A copy of a JSON-like value with secret-looking keys and strings masked. `keep`: a
    predicate of the values left exactly as they are (sealed ones, whose ciphertext is no
    secret and would no longer open with a part of it masked)."""
    if keep is not None and keep(value):
        return value
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and _SECRET_KEY_NAMES.search(k)
                and not (keep is not None and keep(v)) else redact(v, keep=keep))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v, keep=keep) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def shown_arguments(tool, arguments):
    """A tool call's arguments as people and audit records see them: the fields `tool` (a
    ToolSpec, or None) declares sensitive and anything that looks like a credential
    masked."""
    if isinstance(arguments, dict) and tool is not None:
        arguments = {k: (REDACTED if k in tool.redact else v) for k, v in arguments.items()}
    elif tool is not None and tool.redact and arguments is not None:
        # Text the model sent that is not an object (kept as evidence of invalid
        # arguments): a declared field may be anywhere in it.
        return REDACTED
    return redact(arguments)
