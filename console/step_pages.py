"""The run page's table of steps, a page at a time. A run of thousands of steps drew a row
for each (megabytes of HTML) at every drawing of its live part; the table now draws PAGE
rows, and names which ones and how to reach the others.

Unless the link asks for another page (?steps=N: the page holding step N), the table opens
on the step a person is there for: the one the page's recommendation acts on, else the
first step waiting for a person (an outcome nobody knows, a failure, an undo that failed, a
decision), else the step the run is at. At night, paged for a run in attention, that is the
row whose key, remote reference and last error the operator needs, not step 1. The steps
wanting a person on other pages are named with a link to each, so none is hidden by paging."""

from dataclasses import dataclass, field

from runs.models import StepStatus

PAGE = 100
# Steps wanting a person named from the other pages: a run with more has them counted.
ELSEWHERE = 10

WANTING_A_PERSON = frozenset({StepStatus.UNKNOWN, StepStatus.FAILED,
                              StepStatus.COMPENSATION_FAILED, StepStatus.WAITING})


@dataclass(frozen=True)
class StepPage:
    """One page of a run's steps. Numbers count from 1, in the run's order (the table's #)."""

    steps: list  # the rows drawn, each given .number
    first: int  # 0 when the run has no steps
    last: int
    total: int
    # The first number of the pages a link leads to, None where there is none.
    previous: int | None = None
    next: int | None = None
    last_page: int | None = None
    elsewhere: list = field(default_factory=list)  # steps wanting a person, on other pages
    elsewhere_more: int = 0  # and how many more of them are not named
    missing: int | None = None  # a step number asked for that the run does not have

    @property
    def paged(self) -> bool:
        return self.total > PAGE

    @property
    def label(self) -> str:
        return f"Steps {self.first:,}–{self.last:,} of {self.total:,}"

    @property
    def links(self) -> list[tuple[str, int, str]]:
        """(text, the first step number of the page it leads to, rel) of each link, each
        text naming the steps it leads to."""
        links = []
        if self.previous is not None:
            links.append((f"First: {_range(1, self.total)}", 1, ""))
            links.append((f"Previous: {_range(self.previous, self.total)}", self.previous,
                          "prev"))
        if self.next is not None:
            links.append((f"Next: {_range(self.next, self.total)}", self.next, "next"))
            links.append((f"Last: {_range(self.last_page, self.total)}", self.last_page, ""))
        return links


def _range(first: int, total: int) -> str:
    return f"steps {first:,}–{min(first + PAGE - 1, total):,}"


def step_page(steps: list, *, asked: int | None, focus: str = "",
              current: str = "", ended: frozenset = frozenset()) -> StepPage:
    """The page of `steps` (the run's, in order) holding step number `asked`, or without one
    (or past the last) the page holding the step named `focus` (the recommendation's), else
    the first step wanting a person, else the step named `current` (the run's), else the
    first page. The steps named in `ended` read `waiting` though the run's end ended their
    wait (runs.machine.endings.ended_waits): nobody is wanted there."""
    total = len(steps)
    for number, step in enumerate(steps, start=1):
        step.number = number
    if not total:
        return StepPage(steps=[], first=0, last=0, total=0)
    missing = asked if asked is not None and not 1 <= asked <= total else None
    wanted = [s for s in steps if s.status in WANTING_A_PERSON and s.name not in ended]
    if asked is None or missing is not None:
        asked = _focus(steps, wanted, focus, current)
    start = (asked - 1) // PAGE * PAGE
    shown = steps[start:start + PAGE]
    last_start = (total - 1) // PAGE * PAGE
    wanting = [s for s in wanted if not start < s.number <= start + PAGE]
    return StepPage(
        steps=shown, first=start + 1, last=start + len(shown), total=total,
        previous=start - PAGE + 1 if start else None,
        next=start + PAGE + 1 if start < last_start else None,
        last_page=last_start + 1 if start < last_start else None,
        elsewhere=wanting[:ELSEWHERE], elsewhere_more=max(len(wanting) - ELSEWHERE, 0),
        missing=missing)


def _focus(steps: list, wanted: list, focus: str, current: str) -> int:
    by_name = {s.name: s.number for s in steps}
    if focus in by_name:
        return by_name[focus]
    if wanted:
        return wanted[0].number
    return by_name.get(current, 1)
