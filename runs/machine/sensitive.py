"""Declared sensitive fields, encrypted at rest.

A tool declares fields sensitive (`redact=("iban",)`): people and audit records see them
masked (shown: a sealed value as the mask, never its ciphertext), and every table and
archive file holds them encrypted. A sealed value is a string "enc:<key id>:<Fernet
token>" in place of the value (its JSON, encrypted: a number stays a number once opened).
It is opened only where the effect runs (the tool's arguments validated for the call, its
lookup or its undo) and where the model is told what happened, never for display.

Keys come from settings.FIELD_ENCRYPTION_KEYS (key id -> Fernet key); the first one
encrypts, every one decrypts the values it sealed, found by the id each value carries, so a
new key is put in front and the old one kept until no stored value names it
(`manage.py reseal_fields` seals the stored values again with the new one and says which
keys they still name).
"""

import json
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from audit import redaction

# What a sealed value is, and the walk of the sealed values in one (runs.operator.field_keys
# retires a key with it), are defined once, in audit, below runs: wherever audit records
# are shown, a sealed value they keep is shown as the mask (redaction.sealed_masked).
from audit.redaction import SEALED_PREFIX as PREFIX
from audit.redaction import each_sealed as each_sealed
from audit.redaction import is_sealed


class UnreadableValue(Exception):
    """A sealed value names a key this installation does not hold, or does not decrypt."""


@cache
def _fernets(ring: tuple[tuple[str, str], ...]) -> dict[str, Fernet]:
    try:
        return {key_id: Fernet(secret.encode()) for key_id, secret in ring}
    except ValueError as exc:
        raise ImproperlyConfigured(f"FIELD_ENCRYPTION_KEYS: {exc}") from None


def _keys() -> tuple[str, dict[str, Fernet]]:
    ring = tuple(settings.FIELD_ENCRYPTION_KEYS.items())
    if not ring:
        raise ImproperlyConfigured("FIELD_ENCRYPTION_KEYS is empty: sensitive fields cannot "
                                   "be stored")
    return ring[0][0], _fernets(ring)


def encrypt(value) -> str:
    """`value` (anything JSON can hold) sealed with the current key."""
    if is_sealed(value):
        return value
    key_id, fernets = _keys()
    token = fernets[key_id].encrypt(json.dumps(value).encode()).decode()
    return f"{PREFIX}{key_id}:{token}"


def decrypt(sealed: str):
    key_id, _, token = sealed[len(PREFIX):].partition(":")
    fernet = _keys()[1].get(key_id)
    if fernet is None:
        raise UnreadableValue(f"a sensitive value is sealed with key {key_id!r}, which "
                              "FIELD_ENCRYPTION_KEYS does not hold")
    try:
        value = json.loads(fernet.decrypt(token.encode()))
    except InvalidToken:
        raise UnreadableValue(f"a sensitive value sealed with key {key_id!r} does not "
                              "decrypt: the key or the value changed") from None
    # Workflow code may quote it in an error: error texts mask it (redaction).
    redaction.remember_opened(value)
    return value




def seal_fields(value, fields) -> object:
    """A copy of `value` with every field named in `fields` sealed, at any depth of dicts
    and lists (a tool's result may hold the field inside a record)."""
    if not fields:
        return value
    if isinstance(value, dict):
        return {k: (encrypt(v) if k in fields and v is not None else seal_fields(v, fields))
                for k, v in value.items()}
    if isinstance(value, list):
        return [seal_fields(v, fields) for v in value]
    return value


def opened(value):
    """A copy of `value` with every sealed value decrypted: only to run the effect."""
    if is_sealed(value):
        return decrypt(value)
    if isinstance(value, dict):
        return {k: opened(v) for k, v in value.items()}
    if isinstance(value, list):
        return [opened(v) for v in value]
    return value


def key_of(sealed: str) -> str:
    """The id of the key a sealed value names."""
    return sealed[len(PREFIX):].partition(":")[0]


def current_key() -> str:
    """The id of the key that seals now (the first of FIELD_ENCRYPTION_KEYS)."""
    return _keys()[0]


def shown(tool, value):
    """A tool call's arguments or its result as a person sees them, wherever they are shown
    (the run page, the API's run, Django admin, an approval's page, the confirmation of an
    undo): every sealed value in it, at any depth, as the mask a declared field is shown
    with (redaction.REDACTED), never its ciphertext (which tells a person nothing, and which
    the key that sealed it still opens wherever it is copied); then the fields `tool`
    declares and anything that looks like a credential masked (redaction.shown_arguments).
    Nothing of it for a call whose tool is no longer declared (`tool` None): no declaration
    is left to honour."""
    if tool is None:
        return redaction.REDACTED
    return redaction.shown_arguments(tool, redaction.sealed_masked(value))


def declares_sensitive(tool) -> bool:
    """Whether `tool` declares any field sensitive, of its args (redact) or its result."""
    return bool(getattr(tool, "redact", ()) or getattr(tool, "sensitive", ()))


def seal_asked_calls(tool_calls: list[dict], tools: dict) -> list[dict]:
    """The tool calls of a model turn as stored: the raw arguments text of a call sealed
    whole when its tool declares sensitive fields (of its args or its result: the model may
    echo what it was told), or when it names no declared tool while the step has some (what
    an unknown call carries cannot be told)."""
    guarded = any(declares_sensitive(t) for t in tools.values())
    out = []
    for call in tool_calls:
        tool = tools.get(str(call.get("name") or ""))
        sealing = (declares_sensitive(tool) if tool is not None else guarded) \
            and call.get("arguments")
        out.append({**call, "arguments": encrypt(call["arguments"])} if sealing else call)
    return out


def seal_arguments(arguments, tool, tools: dict):
    """A tool call's arguments as stored: the declared fields sealed; the whole value when
    it is not an object the fields can be found in (kept as evidence of invalid arguments),
    or when the call names no declared tool of a step that has sensitive fields."""
    if tool is None:
        guarded = any(declares_sensitive(t) for t in tools.values())
        return encrypt(arguments) if guarded and arguments is not None else arguments
    if not tool.redact or arguments is None:
        return arguments
    if isinstance(arguments, dict) and "unparsed" not in arguments:
        return seal_fields(arguments, tool.redact)
    return encrypt(arguments)


def seal_result(value, tool):
    """A tool call's result as stored (its row, an artifact of it, a lookup's found result):
    redacted, the fields its tool declares sealed (redact, which may come back in the result,
    and sensitive, of the result alone). Sealing again changes nothing: a found result is
    sealed once kept (lookups.kept_answer) and again as its row keeps it."""
    value = redaction.redact(value, keep=is_sealed)
    return seal_fields(value, (*tool.redact, *tool.sensitive)) if tool is not None else value
