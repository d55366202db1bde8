"""What an event's payload must be: checked at the door against the step of any registered
version that waits for the event (validated), and again, on delivery, against the waiting
run's own version (for_run). runs.waiting.events and runs.waiting.kept both check so."""

from pydantic import ValidationError

from audit.quoting import quoted

from ..definitions import definition, wait_checks
from ..models import Step


class EventRefused(ValueError):
    """The event cannot be accepted as sent (unknown workflow or event, invalid payload);
    nothing was written. `reason` says why, whoever delivered it; `errors` lists the
    payload's faults field by field. str() is what the sender at the door is told
    (`nothing_kept`: that sentence ends in "nothing was kept"); refusal() words it for either
    deliverer."""

    def __init__(self, reason: str, errors: list[dict] | None = None, *,
                 nothing_kept: bool = False):
        self.reason = reason
        self.errors = errors or []
        self.nothing_kept = nothing_kept
        super().__init__(refusal(self))


class EventIdReused(ValueError):
    """An event whose source and id were received before with another payload: an id names
    one event, and the one received stands. Nothing was written; str() says so, naming the
    id and both payloads' digests."""


def refusal(refused: EventRefused, *, by_hand: bool = False) -> str:
    """The one wording of a refused event: why, then what it means for whoever delivered it.
    A sender at the door keeps its event: where the refusal says so, it is told nothing was
    kept. A person delivering the event by hand (the Deliver event action: console, CLI, API)
    kept nothing and sent nothing anywhere: what is true for them is that nothing was
    delivered to the run."""
    if by_hand:
        return f"{refused.reason}; nothing was delivered"
    return f"{refused.reason}; nothing was kept" if refused.nothing_kept else refused.reason


def event_steps(workflow: str, event: str) -> list[definition.StepDef]:
    return [s for wf in definition.registry.versions(workflow) for s in wf.steps
            if s.kind == definition.EVENT and s.event_name == event]


def validated(workflow: str, event: str, payload) -> dict:
    """The payload as a step waiting for `event` accepts it, or EventRefused naming why.
    Before its run is known, an event may be meant for a run of any registered version: the
    payload passes if the step of one of them accepts it (the newest first, and its faults
    are the ones named). The run's own version checks it again on delivery (for_run)."""
    if definition.registry.latest(workflow) is None:
        raise EventRefused(f"unknown workflow {quoted(workflow)}")
    steps = event_steps(workflow, event)
    if not steps:
        raise EventRefused(f"no step of {workflow} waits for an event {event!r}")
    if not isinstance(payload, dict):
        raise EventRefused("the payload must be a JSON object",
                           [{"loc": ["payload"], "msg": "not an object"}])
    refused = None
    for step in reversed(steps):
        try:
            return _accepted(step.schema, event, payload)
        except EventRefused as exc:
            refused = refused or exc
    raise refused


def _accepted(schema, event: str, payload: dict) -> dict:
    if schema is None:
        return payload
    try:
        return wait_checks.payload_taken(schema, payload)
    except ValidationError as exc:
        errors = [{"loc": ["payload", *e["loc"]], "msg": e["msg"]} for e in exc.errors()]
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors)
        raise EventRefused(f"payload of {event} does not match {schema.__name__}: {fields}",
                           errors) from None


def one_schema(workflow: str, event: str) -> bool:
    """Whether every registered version checks `event` with the same schema (then the
    check at the door is the check of every run)."""
    return len({id(s.schema) for s in event_steps(workflow, event)}) <= 1


def for_run(step: Step, event: str, payload: dict) -> dict:
    """The payload as the waiting `step` accepts it in its run's own version (whose schema
    may differ from the newest's), or EventRefused naming why."""
    run = step.run
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    spec = next((s for s in workflow.steps if s.name == step.name and s.kind == definition.EVENT
                 and s.event_name == event), None) if workflow else None
    if spec is None:  # the run's version is no longer registered: the door's check stands
        return payload
    try:
        return _accepted(spec.schema, event, payload)
    except EventRefused as exc:
        raise EventRefused(f"run {run.pk} (version {run.workflow_version}) waits for it: "
                           f"{exc.reason}", exc.errors, nothing_kept=exc.nothing_kept) from None
