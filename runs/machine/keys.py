"""Stable idempotency keys.

A key depends only on what the action is (workflow, business key, step, step version), never
on the attempt, the worker or the time, so every resend of the same action carries the same
key. The workflow is part of it because a run is identified by (workflow, business key): two
workflows that share a business key and a step name perform two different actions.

Keys are computed once, when a run's steps are created, and stored on the step rows: a run
in flight keeps the key it started with even if this formula changes.

A re-run from a chosen step (runs.machine.transitions.rerun) sends that step and the later ones as a
new attempt generation: generation G > 0 adds ":gG" to the key, so a receiver that honours
keys performs the action anew instead of answering with the old result. Generation 0 leaves
the key as it always was.
"""

import hashlib


def _generation(generation: int) -> str:
    return f":g{generation}" if generation > 0 else ""


def step_key(workflow: str, business_key: str, step_name: str, step_version: int,
             generation: int = 0) -> str:
    """The idempotency key a step sends with every attempt of its action."""
    return hashlib.sha256(
        f"{workflow}:{business_key}:{step_name}:v{step_version}{_generation(generation)}"
        .encode()
    ).hexdigest()


def compensation_key(workflow: str, business_key: str, step_name: str,
                     step_version: int, generation: int = 0) -> str:
    """The key of a step's compensation, distinct from the key of the action it undoes."""
    return hashlib.sha256(
        f"{workflow}:{business_key}:{step_name}:compensate:v{step_version}"
        f"{_generation(generation)}".encode()
    ).hexdigest()


def tool_call_key(workflow: str, business_key: str, step_name: str, step_version: int,
                  turn: int, call_index: int, tool: str, generation: int = 0) -> str:
    """The key of one tool call of an agent step: the call is identified by its place in the
    stored conversation (turn, index) of the step's generation, which a crash or an operator
    retry never changes; a re-run's new conversation (generation G > 0) adds ":gG"."""
    return hashlib.sha256(
        f"{workflow}:{business_key}:{step_name}:v{step_version}:turn{turn}:call{call_index}:"
        f"{tool}{_generation(generation)}".encode()
    ).hexdigest()


def tool_compensation_key(call_key: str) -> str:
    """The key of a tool call's compensation, distinct from the call's own."""
    return hashlib.sha256(f"{call_key}:compensate".encode()).hexdigest()
