"""Stable idempotency keys.

A key depends only on what the action is (business key, step, step version), never on the
attempt, the worker or the time, so every resend of the same action carries the same key.
"""

import hashlib


def step_key(business_key: str, step_name: str, step_version: int) -> str:
    """The idempotency key a step sends with every attempt of its action."""
    return hashlib.sha256(f"{business_key}:{step_name}:v{step_version}".encode()).hexdigest()


def compensation_key(business_key: str, step_name: str, step_version: int) -> str:
    """The key of a step's compensation, distinct from the key of the action it undoes."""
    return hashlib.sha256(
        f"{business_key}:{step_name}:compensate:v{step_version}".encode()
    ).hexdigest()
