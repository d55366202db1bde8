"""A tool call's result, bounded as a step's is (runs.machine.artifacts): kept apart as an
artifact above RUNS_RESULT_INLINE_BYTES and refused above RUNS_RESULT_MAX_BYTES by the one
rule of both (artifacts.kept_result), and told to the model in a bounded form. The
conversation is sent whole at every turn: a result kept apart goes back to the model as its
start, with its size and sha256, never whole."""

import json

from ..agent_models import ToolCall
from ..definitions import definition
from ..machine import artifacts, sensitive, transitions
from ..machine.transitions import agent_calls as calls_tx
from ..models import Step


def kept(lease: transitions.Lease, step: Step, call: ToolCall, tool: definition.ToolSpec,
         outcome: transitions.Outcome) -> transitions.Outcome:
    """`outcome` of `call` as it is to be recorded: a large result written as an artifact
    (its reference in the outcome), one over the limit the call's error."""
    if not outcome.succeeded or outcome.value is None:
        return outcome
    # Sealed before it is stored anywhere, by the call's own rule: the artifact holds what
    # the row would have held.
    value, too_large = artifacts.kept_result(
        step.run_id, f"{step.name}-{call.tool}",
        calls_tx.stored_result(lease, step, call, outcome.value),
        has_side_effect=tool.has_side_effect)
    if too_large is not None:
        return transitions.Outcome(succeeded=False, error=too_large)
    # Kept in the row (sealed there again by effects.stands, which changes nothing: the row
    # holds what was measured) or as an artifact, its reference in the outcome.
    return transitions.Outcome(succeeded=True, value=value, remote_ref=outcome.remote_ref)


def told(result) -> object:
    """What the model is told a call returned: the result in clear, or, for one kept apart,
    the start of its JSON text with its size and sha256, within RUNS_RESULT_INLINE_BYTES
    (the most a result sent whole can be) once written as the tool's message."""
    if not artifacts.is_artifact(result):
        return sensitive.opened(result)
    about = {"size_bytes": result["size"], "sha256": result["sha256"]}
    try:
        text = artifacts.encoded(sensitive.opened(artifacts.load(result))).decode()
    except (artifacts.ArtifactUnreadable, ValueError) as exc:
        return {"result_kept_apart": {**about, "unreadable": str(exc)}}
    most = artifacts.inline_limit()
    start = text[:most]
    while True:
        shown = {"result_kept_apart": {**about, "shown": f"its first {len(start):,} of "
                                                          f"{len(text):,} characters"},
                 "result_start": start}
        # Escapes make the message longer than the text it carries: cut until it fits.
        size = len(json.dumps(shown).encode())
        if size <= most or not start:
            return shown
        start = start[:max(len(start) * most // size - 200, 0)]
