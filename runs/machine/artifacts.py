"""Bounded state: a step result above the inline threshold is stored as an artifact through
Django's storage API, and the step keeps its reference, size and sha256; a result above the
hard limit is refused. So a 10 MB result is written once, not rewritten into every
checkpoint's WAL, and claims and list pages never load it.

Limits (settings, with their defaults): RUNS_RESULT_INLINE_BYTES (64 KB),
RUNS_RESULT_MAX_BYTES (32 MB), RUNS_INPUT_MAX_BYTES (256 KB), and for what a model proposes,
RUNS_TOOL_ARGUMENTS_MAX_BYTES (64 KB), RUNS_AGENT_TEXT_MAX_CHARS (65,536 characters of a
model turn's text) and RUNS_AGENT_TURN_MAX_TOOL_CALLS (64 calls in one turn). A tool call's
result is kept by the one rule of a step's (kept_result). Artifacts go to the storage named
"artifacts" in STORAGES when there is one (any django-storages backend), else to the file
system under VAR_DIR/artifacts. A summary turn's transcript (the turns it covers, in
full: runs.agents.agent_history) is written the same way, whatever its size.
"""

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage, storages

from ..models import ErrorClass
from . import sensitive
from .errors import Classified

ARTIFACT = "$artifact"
# A result some of whose fields are artifacts written before it (an agent's final answer,
# which its turn refers to): the names of those fields, whose values are references.
PARTS = "$parts"


def limit(name: str, default: int) -> int:
    """A size limit in bytes from the settings."""
    return int(getattr(settings, name, default))


def inline_limit() -> int:
    return limit("RUNS_RESULT_INLINE_BYTES", 64 * 1024)


def result_limit() -> int:
    return limit("RUNS_RESULT_MAX_BYTES", 32 * 1024 * 1024)


def input_limit() -> int:
    return limit("RUNS_INPUT_MAX_BYTES", 256 * 1024)


def over_input_limit(value) -> int | None:
    """The size of `value` as compact JSON if it is over RUNS_INPUT_MAX_BYTES, else None: the
    one measure of what comes in from outside (a run's input, an event's payload). Text the
    database cannot store is counted as written; its own check names it."""
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False)
               .encode("utf-8", "surrogatepass"))
    return size if size > input_limit() else None


def arguments_limit() -> int:
    return limit("RUNS_TOOL_ARGUMENTS_MAX_BYTES", 64 * 1024)


def text_limit() -> int:
    """The most of a model turn's text kept on its row, in characters."""
    return limit("RUNS_AGENT_TEXT_MAX_CHARS", 64 * 1024)


def turn_calls_limit(declared: int | None = None) -> tuple[int, str]:
    """The most tool calls one model turn may ask for, and what sets it: the agent's own
    bound (`declared`, its AgentBudget's max_calls_per_turn) where lower than the
    installation's, which no declaration can raise."""
    most = limit("RUNS_AGENT_TURN_MAX_TOOL_CALLS", 64)
    if declared is not None and declared < most:
        return declared, "the agent's AgentBudget(max_calls_per_turn)"
    return most, "RUNS_AGENT_TURN_MAX_TOOL_CALLS"


class ArtifactUnreadable(ValueError):
    """An artifact's file is missing, or holds other bytes than its reference's sha256."""


class ResultTooLarge(ValueError):
    """A step result over RUNS_RESULT_MAX_BYTES: the message names the limit and the size."""


def storage() -> Storage:
    if "artifacts" in settings.STORAGES:
        return storages["artifacts"]
    return FileSystemStorage(location=Path(settings.VAR_DIR) / "artifacts")


def is_artifact(value) -> bool:
    return isinstance(value, dict) and ARTIFACT in value


def keep(run_id: int, step_name: str, value):
    """`value` as it is to be stored on the step: itself when small, else a reference to
    the artifact written now (named by its content, so writing it again after a crash is
    harmless). Raises ResultTooLarge above the hard limit, having written nothing."""
    body = encoded(value)
    size = len(body)
    if size > result_limit():
        raise ResultTooLarge(f"the result is {size:,} bytes, over the limit of "
                             f"{result_limit():,} bytes (RUNS_RESULT_MAX_BYTES)")
    if size <= inline_limit():
        return value
    return stored(run_id, step_name, body)


def kept_result(run_id: int, stem: str, value, *,
                has_side_effect: bool) -> tuple[object, Classified | None]:
    """What a call returned (a step's or a tool call's), as it is to be stored (keep), and
    None; or None and the call's error when it is over RUNS_RESULT_MAX_BYTES.

    Trying again returns the same result, naming limit and size. A read changed nothing: a
    permanent error. A write or notification has acted elsewhere by the time it returns:
    unclassified, as a result the database cannot store is, so its effect is held as one
    that may stand (looked up by key, counted by four eyes, undone by compensation), never
    as one that failed with nothing changed."""
    try:
        return keep(run_id, stem, value), None
    except ResultTooLarge as exc:
        cls = ErrorClass.UNCLASSIFIED if has_side_effect else ErrorClass.PERMANENT
        return None, Classified(cls, str(exc))


def kept_with_parts(value: dict, parts: dict[str, dict]) -> tuple[dict | None,
                                                                 Classified | None]:
    """`value` as it is to be stored when its fields `parts` (field -> reference) are held
    whole by artifacts written before it: those fields by their reference, named under
    PARTS, so each is stored once, and load gives the value whole; and None. Or None and a
    read's error when the value whole is over RUNS_RESULT_MAX_BYTES. The other fields are
    few and small (an agent's counts): they are kept on the row."""
    size = len(encoded({k: v for k, v in value.items() if k not in parts})) + sum(
        reference["size"] for reference in parts.values())
    if size > result_limit():
        return None, Classified(ErrorClass.PERMANENT, (
            f"the result is {size:,} bytes, over the limit of {result_limit():,} bytes "
            "(RUNS_RESULT_MAX_BYTES)"))
    return {**value, **parts, PARTS: sorted(parts)}, None


def write(run_id: int, stem: str, value) -> dict:
    """`value` written as an artifact whatever its size (a record kept apart from the rows,
    such as a summary's transcript), and its reference."""
    return stored(run_id, stem, encoded(value))


def encoded(value) -> bytes:
    """An artifact's bytes: the value as compact JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def stored(run_id: int, stem: str, body: bytes) -> dict:
    """The reference of `body` written under runs/<run>/<stem>-<sha256>.json. Named by its
    content: writing the same body again (after a crash, on a retry) finds it there and
    writes nothing, so one content never becomes two artifacts."""
    digest = hashlib.sha256(body).hexdigest()
    name = f"runs/{run_id}/{stem}-{digest[:32]}.json"
    where = storage()
    if where.exists(name) and where.size(name) != len(body):
        # A write cut short by a crash (a file system writes in place): the name promises
        # this content, so what is there is wrong and is written again.
        where.delete(name)
    if not where.exists(name):
        name = where.save(name, ContentFile(body))
    return {ARTIFACT: name, "size": len(body), "sha256": digest}


def names(value) -> set[str]:
    """The names of the artifacts a stored value refers to: its own, or its parts' (a value
    kept with parts); none for a value kept whole on its row."""
    if is_artifact(value):
        return {value[ARTIFACT]}
    if isinstance(value, dict) and isinstance(value.get(PARTS), list):
        return {value[part][ARTIFACT] for part in value[PARTS] if is_artifact(value.get(part))}
    return set()


def remove(name: str) -> None:
    """Delete the artifact `name` (gone already: nothing). Named by its content, a file may
    be referred to by more than one row: the caller has made sure that none does."""
    storage().delete(name)


def read(value) -> bytes:
    """The bytes behind an artifact reference, checked against its sha256. Raises
    ArtifactUnreadable when they are missing or are not the bytes the reference names."""
    try:
        with storage().open(value[ARTIFACT], "rb") as handle:
            body = handle.read()
    except OSError as exc:
        raise ArtifactUnreadable(f"artifact {value[ARTIFACT]} cannot be read "
                                 f"({type(exc).__name__}: {exc})") from exc
    if hashlib.sha256(body).hexdigest() != value["sha256"]:
        raise ArtifactUnreadable(f"artifact {value[ARTIFACT]} does not match its sha256 "
                                 f"{value['sha256']}")
    return body


def load(value):
    """The stored value behind an artifact reference (checked against its sha256), or the
    value itself; a value kept with parts (kept_with_parts) with each part read."""
    if isinstance(value, dict) and isinstance(value.get(PARTS), list):
        return {name: json.loads(read(part)) if name in value[PARTS] else part
                for name, part in value.items() if name != PARTS}
    if not is_artifact(value):
        return value
    return json.loads(read(value))


class Results(Mapping):
    """Earlier steps' results for a step context: artifacts are read only when a step asks
    for that result, once."""

    def __init__(self, stored: dict):
        self._stored, self._loaded = stored, {}

    def __getitem__(self, name):
        if name not in self._loaded:
            # A step function sees earlier results as they were returned: in clear.
            self._loaded[name] = sensitive.opened(load(self._stored[name]))
        return self._loaded[name]

    def __iter__(self) -> Iterator:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)
