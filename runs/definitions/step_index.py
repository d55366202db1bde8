"""A workflow's steps by name: a page or a rule asks for the declaration of each step of a
run, and a search of the workflow's list for each made a run of thousands of steps quadratic
(the console's run page of a 20,000-step run never drew); a declaration asks whether its
name is taken, and a search for each made declaring a long workflow quadratic too."""


class StepList(list):
    """A workflow's list of steps, which counts its changes other than appends (a step
    replaced, moved or removed, as tests play a release), so that the table knows when a
    name it lacks may be in the list after all."""

    changes = 0

    def _change(self) -> None:
        self.changes += 1

    def __setitem__(self, index, value):
        self._change()
        super().__setitem__(index, value)

    def __delitem__(self, index):
        self._change()
        super().__delitem__(index)

    def __imul__(self, times):
        self._change()
        return super().__imul__(times)

    def insert(self, index, value):
        self._change()
        super().insert(index, value)

    def pop(self, index=-1):
        self._change()
        return super().pop(index)

    def remove(self, value):
        self._change()
        super().remove(value)

    def reverse(self):
        self._change()
        super().reverse()

    def sort(self, **kwargs):
        self._change()
        super().sort(**kwargs)

    def clear(self):
        self._change()
        super().clear()


def find_step(workflow, name: str):
    """The step `name` of `workflow` (its StepDef), or None. The table is made again whenever
    what it remembers is no longer so at that place of the list: steps declared later, a
    list reordered, a step replaced or renamed in place (as tests play a release)."""
    entry = _table(workflow).get(name)
    if entry is None or not _holds(workflow.steps, entry, name):
        entry = _table(workflow, anew=True).get(name)
    return entry[1] if entry is not None else None


def declared(workflow, name: str) -> bool:
    """Whether `workflow` declares a step `name` (as any(s.name == name for s in
    workflow.steps), asked at each declaration). A name the table lacks is taken as free
    while the table covers the list as it is: the same StepList, changed since by appends
    only, which are added to the table; any other list is searched again."""
    entry = _table(workflow).get(name)
    if (entry is None and not isinstance(workflow.steps, StepList)) or \
            (entry is not None and not _holds(workflow.steps, entry, name)):
        entry = _table(workflow, anew=True).get(name)
    return entry is not None


def _holds(steps, entry, name: str) -> bool:
    return entry[0] < len(steps) and steps[entry[0]] is entry[1] and entry[1].name == name


def _table(workflow, *, anew: bool = False) -> dict:
    """{name: (place, step)}, kept on the workflow with the list it was made from, how many
    of its steps it covers and the list's count of changes then; steps appended since are
    added to it, and anything else makes it again."""
    steps = workflow.steps
    changes = getattr(steps, "changes", None)
    made = getattr(workflow, "_steps_by_name", None)
    if anew or made is None or made[0] is not steps or made[1] > len(steps) \
            or made[2] != changes:
        made = (steps, 0, changes, {})
    _, covered, _, table = made
    for place in range(covered, len(steps)):
        table[steps[place].name] = (place, steps[place])
    workflow._steps_by_name = (steps, len(steps), changes, table)
    return table
