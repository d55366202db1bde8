"""A run's step rows found by name, and the first one not done, without a pass over every
row: a worker asks for the row of the step it called (to record its outcome), for the next
step to work (at every checkpoint) and for an earlier step's result (a step reading the one
before it), and a search of the run's rows for each made a run of thousands of steps
quadratic in its length (a run of 1,000 steps executed 47 times the runtime's lines of a run
of 100).

A RowIndex belongs to one list of rows (a lease's): a list read anew gets one of its own. A
row found at a remembered place is checked to be there still, and a name not found where
remembered is looked for again in the list as it is, so a list changed in place (a row
replaced or moved) is never answered from what it was."""

from ..models import DONE_STEP_STATUSES, Step


class RowIndex:
    """Each row's place by name in `steps`, and how far from the start every row was done
    when last looked: rows done stay done while a worker holds them (only an operator's
    transition, on rows it reads itself, takes a step back; a compensation undoes its steps
    without asking for the next step to work)."""

    def __init__(self, steps: list[Step]):
        self.steps = steps
        self.places: dict[str, int] = {}  # made at the first name asked for
        self.done_through = 0

    def named(self, name: str) -> Step | None:
        steps, place = self.steps, self.places.get(name)
        if place is None or place >= len(steps) or steps[place].name != name:
            self.places = {step.name: place for place, step in enumerate(steps)}
            place = self.places.get(name)
            if place is None:
                return None
        return steps[place]

    def first_not_done(self) -> Step | None:
        steps, place = self.steps, self.done_through
        while place < len(steps) and steps[place].status in DONE_STEP_STATUSES:
            place += 1
        self.done_through = place
        return steps[place] if place < len(steps) else None


def index_of(holder, steps: list[Step]) -> RowIndex:
    """The index of `steps` kept on `holder` (its `row_index`), made anew for another list."""
    index = holder.row_index
    if index is None or index.steps is not steps:
        index = holder.row_index = RowIndex(steps)
    return index
