"""A worker's hold on a run, as the transitions of the lease holder pass it along."""

from dataclasses import dataclass, field
from datetime import datetime

from audit.quoting import quoted

from ...definitions import definition
from ...models import Run, Step
from ..errors import NoSuchStep
from ..step_rows import RowIndex, index_of


@dataclass
class Lease:
    """A worker's hold on a run: the token it claimed with and the rows as it left them."""

    run: Run
    steps: list[Step]
    token: int
    worker: str
    definition: definition.Workflow | None
    work: Step | None = None
    # True when `work` is a step whose outcome is unknown: reconcile it before anything else.
    settle_first: bool = False
    # True when `work` is a compensation to call rather than the step's action.
    compensating: bool = False
    finished: bool = False
    # The run's input as its workflow's schema parsed it at the claim (lease_cycle).
    validated_input: object = None
    # The time the claim was given (a test's), judged by rather than the database's clock.
    clock: datetime | None = None
    # The compensation's order for these step rows, worked out once (compensation.next_undo).
    undo_order: tuple | None = None
    # These step rows by name and how far they are done (step_rows.index_of).
    row_index: RowIndex | None = None
    # The definitions of its steps found so far (spec).
    specs: dict[str, definition.StepDef] = field(default_factory=dict)
    # What each approval step's rule answered when this lease reached the step, by (step
    # name, generation) (approval_rules): a change tried and thrown away (lease_cycle's one
    # statement, a checkpoint the database rolled back) is made again with the same answer,
    # the rule not asked twice. A copy of the lease (copy.copy) shares it.
    rule_answers: dict[tuple[str, int], tuple[dict, str] | None] = field(default_factory=dict)

    def spec(self, name: str) -> definition.StepDef:
        """Step `name` of the run's workflow (KeyError when it has none), found once per
        lease: a step's pause check, intent and call each read it."""
        spec = self.specs.get(name)
        if spec is None:
            spec = self.specs[name] = self.definition.step(name)
        return spec

    def by_name(self, name: str) -> Step:
        step = index_of(self, self.steps).named(name)
        if step is None:
            raise NoSuchStep(f"run {self.run.pk} has no step {quoted(name)}")
        return step
