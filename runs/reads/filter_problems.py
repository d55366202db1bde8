"""What makes the runs list's status filter or search one no run can be listed by, in the
words every door says it in (the console's runs page, GET /api/runs, manage.py list_runs):
a status that is none of the runs' statuses, and a search holding a NUL character, which
no text column stores. Each door refuses it naming the field, never in its own framework's
words (a form's "Select a valid choice", a schema's enum, argparse's choices)."""

from runs.models import RunStatus


def status_problem(status: str) -> str | None:
    """Why `status` filters no run ("" is no filter), or None."""
    if status == "" or status in RunStatus.values:
        return None
    return f"status: no status {status!r}; the statuses are: {', '.join(RunStatus.values)}"


def search_problem(q: str) -> str | None:
    """Why the search `q` can be looked up in no column (a NUL), or None."""
    return "search: NUL characters cannot be stored" if "\x00" in q else None


def run_filter_problems(*, status: str = "", q: str = "") -> dict[str, str]:
    """The runs list's filters refused, by field ("status", "q"): what each door says."""
    found = {"status": status_problem(status), "q": search_problem(q)}
    return {field: problem for field, problem in found.items() if problem}
