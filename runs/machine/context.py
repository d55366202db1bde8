"""What a step function sees: the run's business key and input, its key, its attempt,
earlier steps' results and the services object. Never a Run or Step row, never a secret."""

from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from audit import redaction

from ..definitions.input_errors import input_errors_text
from ..models import Step
from .artifacts import Results
from .errors import TransitionNotAllowed
from .step_rows import RowIndex


@dataclass(frozen=True)
class StepContext:
    run_id: int
    workflow: str
    business_key: str
    input: Any
    step: str
    key: str
    attempt: int
    results: Mapping  # read-only; a large result is read from its artifact when asked for
    services: Any = None
    remote_ref: str = ""
    _heartbeat: Callable[[], bool] = field(default=lambda: True, repr=False)

    def heartbeat(self) -> bool:
        """Extend this worker's lease during a long step. False means the lease was lost:
        another worker owns the run now and this step's result will only be kept as evidence."""
        return self._heartbeat()


# Steps whose result a later step (or a compensation, or a reconcile function) may read:
# what happened stays a fact while it is being undone, and after.
_RESULT_STATUSES = frozenset({"succeeded", "compensating", "compensated",
                              "compensation_failed"})


class StepResults(Mapping):
    """The results of the steps whose result a step may read (_RESULT_STATUSES), by name,
    looked up in the rows when a step asks for one. A mapping built whole for every step made
    each step's context cost grow with the steps before it, and so did a search of the rows
    for each result asked for: a run of thousands of steps spent most of its time on them.
    `rows`: the worker's index of its lease's rows, kept from step to step."""

    def __init__(self, rows: RowIndex):
        self._rows = rows

    def __getitem__(self, name: str):
        step = self._rows.named(name)
        if step is not None and step.status in _RESULT_STATUSES:
            return step.result
        raise KeyError(name)

    def __iter__(self):
        return (s.name for s in self._rows.steps if s.status in _RESULT_STATUSES)

    def __len__(self) -> int:
        return sum(1 for s in self._rows.steps if s.status in _RESULT_STATUSES)


def build_context(run, steps, step, *, definition, services, validated_input=None,
                  compensating: bool = False, heartbeat: Callable[[], bool] | None = None,
                  rows: RowIndex | None = None) -> StepContext:
    """The one way to build what a step function, its reconcile, its compensation, its
    compensation preview or an approval snapshot sees. `run` and `steps` are rows (read
    here, never handed on); a compensation gets its own key and attempt count. `rows`: the
    worker's index of `steps`, kept from one step to the next (step_rows.index_of)."""
    if validated_input is None:
        validated_input = definition.input_schema.model_validate(run.input)
    if compensating:
        key, attempt = step.compensation_key, step.compensation_attempt
    else:
        key, attempt = step.idempotency_key, step.attempt
    return StepContext(
        run_id=run.pk, workflow=run.workflow_name, business_key=run.business_key,
        input=validated_input, step=step.name, key=key, attempt=attempt,
        results=Results(StepResults(rows or RowIndex(list(steps)))),
        services=services, remote_ref=step.remote_ref,
        _heartbeat=heartbeat or (lambda: True),
    )


@contextmanager
def opened_services(definition, *, wanted: bool = True):
    """The workflow's services (HTTP and model clients), closed on the way out."""
    services = definition.services_factory() if wanted and definition.services_factory \
        else None
    try:
        yield services
    finally:
        close = getattr(services, "close", None)
        if close is not None:
            close()


def parsed_input(run, definition):
    """The run's input as its version parses it, for work outside the executor; refused
    (TransitionNotAllowed) when the schema no longer accepts it, as the run's own claim
    refuses it (runs.machine.transitions.lease_cycle)."""
    validated_input, errors = definition.parse_input(run.input)
    if errors:
        raise TransitionNotAllowed(
            f"{run.workflow_name} v{run.workflow_version} no longer accepts this run's input "
            f"({input_errors_text(errors)}): nothing can be asked with it; record the outcome "
            "by hand with evidence instead")
    return validated_input


@contextmanager
def context_outside_executor(run, step_name: str, *, definition, with_services: bool,
                             compensating: bool = False):
    """A step's context for work done outside the executor (an operator's lookup, an
    approval snapshot, a compensation preview), with the clients it opens closed after."""
    validated_input = parsed_input(run, definition)
    steps = list(Step.objects.filter(run=run).order_by("position"))
    step = next(s for s in steps if s.name == step_name)
    with opened_services(definition, wanted=with_services) as services, \
            redaction.values_masked():
        yield build_context(run, steps, step, definition=definition, services=services,
                            validated_input=validated_input, compensating=compensating)
