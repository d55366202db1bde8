"""Seals: what makes an archive file verifiable on its own, under any name.

A hash chain alone proves nothing to someone who can recompute it: whoever edits a record
can rehash the chain, fix the run row's head and save the file under a new name. So every
run written to an archive carries a seal: the SHA-256 digest of each part of the run as
written (its row, its steps, tool calls, turns, events, audit records, approvals,
notifications, deliveries) and an HMAC-SHA256 over those digests, keyed with a secret the
file's holder does not have. The file ends with a seal of its own, an HMAC over the header
and the seals of its runs in order, so a run removed or a file cut short is found too.

Keys come from settings.ARCHIVE_SIGNING_KEYS (key id -> secret; the first is the one that
signs, the others still verify, for rotation), each seal names its key id.
"""

import hashlib
import hmac
import json
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .head_seals import same_mac


class UnknownKey(Exception):
    """A seal names a key id this installation does not hold."""


def _to_json(value):
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def canonical(value) -> bytes:
    """The bytes a digest or MAC covers: the value as it reads back from the file (a
    datetime as its isoformat string), keys sorted, no spaces. Writing and checking a
    file agree on it whatever order or spacing the file's lines have."""
    return json.dumps(value, default=_to_json, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def digest(value) -> str:
    # One JSON round trip: the digest at writing covers exactly what the reader parses.
    return hashlib.sha256(canonical(json.loads(canonical(value)))).hexdigest()


def signing_keys() -> tuple[str, dict[str, bytes]]:
    """(the id of the key that signs, every key id -> secret)."""
    keys = settings.ARCHIVE_SIGNING_KEYS
    if not keys:
        raise ImproperlyConfigured("ARCHIVE_SIGNING_KEYS is empty: archives cannot be sealed")
    return next(iter(keys)), {k: v.encode() for k, v in keys.items()}


def _mac(key_id: str, message) -> str:
    _, keys = signing_keys()
    if key_id not in keys:
        raise UnknownKey(key_id)
    return hmac.new(keys[key_id], canonical(message), hashlib.sha256).hexdigest()


def seal_run(run_id: int, parts: dict) -> dict:
    """The seal of one run: the digest of each part, and their MAC with the current key."""
    key_id, _ = signing_keys()
    digests = {name: digest(rows) for name, rows in sorted(parts.items())}
    return {"key_id": key_id, "digests": digests,
            "mac": _mac(key_id, {"run": run_id, "digests": digests})}


def seal_file(header: dict, run_seals: Iterable[tuple[int, str]]) -> dict:
    """The file's seal: the header and every run's (id, MAC), in the file's order."""
    key_id, _ = signing_keys()
    runs = [[run_id, mac] for run_id, mac in run_seals]
    return {"key_id": key_id, "runs": len(runs),
            "mac": _mac(key_id, {"header": header, "runs": runs})}


def run_problems(run_id, parts: dict, seal: dict | None) -> list[str]:
    """What differs between a run as read and its seal, naming the run and the part."""
    if not isinstance(seal, dict):
        return [f"run {run_id} carries no seal: it cannot be told apart from a forgery"]
    key_id = str(seal.get("key_id"))
    sealed = seal.get("digests") if isinstance(seal.get("digests"), dict) else {}
    try:
        expected = _mac(key_id, {"run": run_id, "digests": sealed})
    except UnknownKey:
        return [f"run {run_id} is sealed with key {key_id!r}, which this installation does "
                "not hold (ARCHIVE_SIGNING_KEYS)"]
    problems = []
    found = {name: digest(rows) for name, rows in parts.items()}
    changed = sorted(name for name in found.keys() | sealed.keys()
                     if found.get(name) != sealed.get(name))
    if not same_mac(expected, str(seal.get("mac", ""))):
        problems.append(f"run {run_id}: its seal does not verify with key {key_id!r} "
                        "(the seal was recomputed or forged)")
    if changed:
        problems.append(f"run {run_id}: {', '.join(changed)} differ from what was sealed")
    return problems


def file_problems(header: dict | None, run_seals: list[tuple[int, str]],
                  seal: dict | None) -> list[str]:
    """What differs between a file's runs, in order, and the file's seal."""
    if header is None:
        return ["the file has no header line"]
    if not isinstance(seal, dict):
        return ["the file has no seal line: it was cut short or its seal removed "
                f"({len(run_seals)} runs read)"]
    key_id = str(seal.get("key_id"))
    try:
        expected = _mac(key_id, {"header": header,
                                 "runs": [[run_id, mac] for run_id, mac in run_seals]})
    except UnknownKey:
        return [f"the file is sealed with key {key_id!r}, which this installation does not "
                "hold (ARCHIVE_SIGNING_KEYS)"]
    if same_mac(expected, str(seal.get("mac", ""))):
        return []
    if seal.get("runs") != len(run_seals):
        return [f"the file's seal counts {seal.get('runs')} runs but {len(run_seals)} were "
                "read: runs were removed or added"]
    return ["the file's seal does not verify: its header or the order of its runs changed"]
