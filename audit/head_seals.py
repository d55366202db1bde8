"""Keyed seals of chain heads: what a rewritten chain cannot forge.

A chain's hashes are not keyed: whoever can write the audit table and the row that keeps a
chain's head (a database superuser) can rewrite every record, recompute every hash and set
the head to match, and the chain verifies. So each head is stored with a seal, an
HMAC-SHA256 over (chain, seq, head hash) with a key the database does not hold
(settings.AUDIT_SEAL_KEYS: key id -> secret, the first signs, the others still verify, for
rotation). A head whose seal does not verify was not written by the runtime.

What a seal cannot tell: a chain set back to an earlier head together with that head's seal
(kept from a backup or read before), since both were genuine once; and anything done by
someone who holds the key.

The seal is "key id:hex MAC". A run's chain is named by the run's id, the access chain by
ACCESS_CHAIN, so the seal of one chain's head is never that of another's. The migrations
that sealed the heads written before seals (runs 0048, audit 0008) spell the message out
again, as migrations must: a change to it leaves the seals they wrote unverifiable.
"""

import hashlib
import hmac

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

ACCESS_CHAIN = "access"


def _ring() -> dict[str, str]:
    keys = settings.AUDIT_SEAL_KEYS
    if not keys:
        raise ImproperlyConfigured("AUDIT_SEAL_KEYS is empty: audit chain heads cannot be "
                                   "sealed or verified")
    return keys


def _mac(secret: str, chain, seq: int, head_hash: str) -> str:
    # Run ids and seqs are digits and hashes hex: the colons cannot be shifted between
    # fields to make one head's message another's. hmac.digest is the one-shot C path: the
    # seal is made at every head a transition writes.
    message = f"audit-head:{chain}:{seq}:{head_hash}".encode()
    return hmac.digest(secret.encode(), message, hashlib.sha256).hex()


def seal_head(chain, seq: int, head_hash: str) -> str:
    """The seal of the head (seq, head_hash) of chain `chain` (a run id, or ACCESS_CHAIN),
    with the key that signs."""
    keys = _ring()
    key_id = next(iter(keys))
    return f"{key_id}:{_mac(keys[key_id], chain, seq, head_hash)}"


def head_seal_problem(chain, seq: int, head_hash: str, seal: str | None) -> str | None:
    """Why `seal` is not a seal of the head (seq, head_hash) of chain `chain`, in words an
    auditor can act on, or None when it verifies (with any key of the ring)."""
    if not seal:
        return ("its head carries no seal: the head was written outside the runtime, or its "
                "seal was removed")
    # A file's seal is whatever its JSON holds (a checkpoint's, an archived run's row).
    key_id, sep, mac = seal.partition(":") if isinstance(seal, str) else ("", "", "")
    keys = _ring()
    if not sep:
        return ("its head's seal is not of the form key-id:mac: the head was written "
                "outside the runtime")
    if key_id not in keys:
        return (f"its head is sealed with key {key_id!r}, which this installation does not "
                "hold (AUDIT_SEAL_KEYS): the seal cannot be checked")
    if not same_mac(_mac(keys[key_id], chain, seq, head_hash), mac):
        return (f"the head's seal does not verify with key {key_id!r}: the chain was "
                "rewritten, or its head changed outside the runtime")
    return None


def same_mac(expected: str, given: str) -> bool:
    """Whether `given` is the hex MAC `expected`, compared in constant time. A MAC read from
    a file may hold any text: hmac.compare_digest refuses non-ASCII strings with a
    TypeError, so they are compared as UTF-8 bytes (a lone surrogate kept as it is)."""
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogatepass"))


def signing_key_id() -> str:
    """The id of the key that seals new heads: the first of AUDIT_SEAL_KEYS."""
    return next(iter(_ring()))


def sealed_with(seal: str | None, key_id: str) -> bool:
    """Whether `seal` names `key_id` (not whether it verifies: head_seal_problem says that)."""
    return bool(seal) and seal.partition(":")[0] == key_id
