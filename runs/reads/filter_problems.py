"""What makes the runs list's status filter or search one no run can be listed by, in the
words every door says it in (the console's runs page, GET /api/runs, manage.py list_runs):
a status that is none of the runs' statuses, a search holding a NUL character, which no
text column stores, or another control character, and a search longer than anything it
looks in. Each door refuses it naming the field, never in its own framework's words (a
form's "Select a valid choice", a schema's enum or length, argparse's choices)."""

from audit.quoting import quoted
from runs.agent_models import ToolCall
from runs.machine.storable import has_control_characters
from runs.models import Run, RunStatus, Step

from .search import SEARCHED_REFERENCES

# The longest search there is something to find by: what a business key, a step's or a
# tool call's remote or compensation reference holds at most (300 characters; an
# idempotency key 64, a run id fewer). A longer one (a paste that ran on) matches no run.
SEARCH_MOST = max(Run._meta.get_field("business_key").max_length,
                  *(model._meta.get_field(field).max_length
                    for model in (Step, ToolCall) for field in SEARCHED_REFERENCES))


def status_problem(status: str) -> str | None:
    """Why `status` filters no run ("" is no filter), or None."""
    if status == "" or status in RunStatus.values:
        return None
    return (f"status: no status {quoted(status)}; the statuses are: "
            f"{', '.join(RunStatus.values)}")


def search_problem(q: str) -> str | None:
    """Why the search `q` can be looked up in no column (a NUL, a length none holds) or is
    refused as a text naming one thing is (a business key, a step, a remote reference: a
    control character, has_control_characters), or None. A line break, an escape or a bidi
    override in a search is a paste that carried it along: answered "no run matches", it
    told the person that the run they looked for does not exist."""
    if "\x00" in q:
        return "search: NUL characters cannot be stored"
    if len(q) > SEARCH_MOST:
        return (f"search: at most {SEARCH_MOST} characters (no business key or reference is "
                f"longer); this one has {len(q)}")
    if has_control_characters(q):
        return ("search: control characters (a line break, a tab, an escape, ...) cannot be "
                "part of it")
    return None


def run_filter_problems(*, status: str = "", q: str = "") -> dict[str, str]:
    """The runs list's filters refused, by field ("status", "q"): what each door says."""
    found = {"status": status_problem(status), "q": search_problem(q)}
    return {field: problem for field, problem in found.items() if problem}
