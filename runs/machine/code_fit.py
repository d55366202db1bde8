"""Whether the workflow code of this process can work a run of a version: the one rule a
worker applies to each run it claims (transitions.lease_cycle holds the run for a person
when it cannot), and a release check applies to every version with runs in flight before
they wake (runs.operator.release_check)."""

from ..definitions import definition


def code_problem(name: str, workflow_def: definition.Workflow | None, step_names: list[str], *,
                 undoing: bool) -> str | None:
    """Why the code cannot work a run of `name` ("<workflow> v<version>") started with the
    steps `step_names` (in their order), or None. `undoing`: the run is being compensated
    (an undo walks the run's own rows, so steps added since do not matter to it)."""
    if workflow_def is None:
        return f"{name} is not registered in this worker"
    # A release renamed or removed steps without a new version: no rule can read them.
    known = {spec.name for spec in workflow_def.steps}
    renamed = [repr(step) for step in step_names if step not in known]
    if renamed:
        return f"{name} in this worker has no step {', '.join(renamed)} of this run"
    # A release added steps without a new version: the run has no row for them and would
    # pass them by, completing without their work.
    started_with = set(step_names)
    added = [repr(spec.name) for spec in workflow_def.steps if spec.name not in started_with]
    if added and not undoing:
        return (f"{name} in this worker has step {', '.join(added)}, which this run was "
                "started without: a release added it without a new version, and the run "
                "would pass it by")
    return None
