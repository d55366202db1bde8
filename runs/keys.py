"""Stable idempotency keys.

A key depends only on what the action is (workflow, business key, step, step version), never
on the attempt, the worker or the time, so every resend of the same action carries the same
key. The workflow is part of it because a run is identified by (workflow, business key): two
workflows that share a business key and a step name perform two different actions.

Keys are computed once, when a run's steps are created, and stored on the step rows: a run
in flight keeps the key it started with even if this formula changes.
"""

import hashlib


def step_key(workflow: str, business_key: str, step_name: str, step_version: int) -> str:
    """The idempotency key a step sends with every attempt of its action."""
    return hashlib.sha256(
        f"{workflow}:{business_key}:{step_name}:v{step_version}".encode()
    ).hexdigest()


def compensation_key(workflow: str, business_key: str, step_name: str,
                     step_version: int) -> str:
    """The key of a step's compensation, distinct from the key of the action it undoes."""
    return hashlib.sha256(
        f"{workflow}:{business_key}:{step_name}:compensate:v{step_version}".encode()
    ).hexdigest()


def tool_call_key(workflow: str, business_key: str, step_name: str, step_version: int,
                  turn: int, call_index: int, tool: str) -> str:
    """The key of one tool call of an agent step: the call is identified by its place in the
    stored conversation (turn, index), which a crash or an operator retry never changes."""
    return hashlib.sha256(
        f"{workflow}:{business_key}:{step_name}:v{step_version}:turn{turn}:call{call_index}:"
        f"{tool}".encode()
    ).hexdigest()


def tool_compensation_key(call_key: str) -> str:
    """The key of a tool call's compensation, distinct from the call's own."""
    return hashlib.sha256(f"{call_key}:compensate".encode()).hexdigest()
