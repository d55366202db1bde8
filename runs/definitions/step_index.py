"""A workflow's steps by name: a page or a rule asks for the declaration of each step of a
run, and a search of the workflow's list for each made a run of thousands of steps quadratic
(the console's run page of a 20,000-step run never drew)."""


def find_step(workflow, name: str):
    """The step `name` of `workflow` (its StepDef), or None. The table is made again whenever
    what it remembers is no longer so at that place of the list: steps declared later, a
    list reordered, a step replaced or renamed in place (as tests play a release)."""
    steps = workflow.steps
    entry = getattr(workflow, "_steps_by_name", {}).get(name)
    if entry is None or entry[0] >= len(steps) or steps[entry[0]] is not entry[1] \
            or entry[1].name != name:
        workflow._steps_by_name = {step.name: (i, step) for i, step in enumerate(steps)}
        entry = workflow._steps_by_name.get(name)
    return entry[1] if entry is not None else None
