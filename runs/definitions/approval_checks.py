"""Who approves an approval step or an agent's tool calls, and how long they have, checked
when it is declared (the rules of runs.definitions.validation, for the approvals app's
requests): a mistake here failed, or did nothing, only once a request opened."""

from .durations import dated_problem, duration_problem
from .validation import refuse


def check_approvers(place: str, *, approvers, escalate_to, remind_every, timeout,
                    on_timeout: str, policies: tuple[str, ...]) -> None:
    """Refuse who approves and how long they have, for an approval step and an agent's tool
    approval alike (`place` starts the refusal): an approver the approvals app could not ask
    ("user:" naming nobody, "user: ann" naming ' ann', a string whose letters would be taken
    for approvers), or a reminder or timeout that is no positive timedelta (a reminder every
    0 s is a mail a tick; a negative timeout times every request out as it opens); a
    reminder of None is none."""
    problem = None
    if on_timeout not in policies:
        problem = f"on_timeout must be one of {', '.join(policies)}, not {on_timeout!r}"
    elif on_timeout == "escalate" and not escalate_to:
        problem = "on_timeout='escalate' needs escalate_to"
    elif not all(isinstance(given, tuple | list | set | frozenset)
                 for given in (approvers, escalate_to)):
        # A string's letters would be taken for approvers; a generator was emptied by these
        # checks, and the policy kept nobody to ask.
        given = escalate_to if isinstance(approvers, tuple | list | set | frozenset) else approvers
        problem = ("approvers and escalate_to are tuples: write (\"group:finance\",), not "
                   f"{'a string' if isinstance(given, str) else type(given).__name__}")
    elif not approvers:
        problem = "name at least one approver"
    elif escalate_to and on_timeout != "escalate":
        # The deputies are asked only by an escalation (approvals.timeouts): under another
        # policy they were never asked, though the declaration and the access pages named them.
        problem = (f"escalate_to names who is asked when on_timeout='escalate', and "
                   f"on_timeout is {on_timeout!r}: declare on_timeout='escalate', or no "
                   "escalate_to")
    # remind_every=None: the approvers are told once, when the request opens, and never
    # reminded (approvals.requests.next_reminder gives such a request no reminder).
    durations = (("remind_every", remind_every),) if remind_every is not None else ()
    for option, value in (*durations, ("timeout", timeout)):
        problem = problem or duration_problem(option, value) or dated_problem(option, value)
    for who in () if problem else (*approvers, *escalate_to):
        problem = problem or approver_problem(who)
    refuse(place, problem)


def approver_problem(who) -> str | None:
    """Why the approvals app could not ask `who`, or None. A name is looked up as it is
    written (approvals.notifications): "user: ann" was accepted here and asked nobody, the
    request recording only an unknown user ' ann' once it opened."""
    kind, _, named = str(who).partition(":")
    if not isinstance(who, str) or kind.strip() not in ("user", "group") or not named.strip():
        return f"{who!r} is neither 'user:<name>' nor 'group:<name>'"
    if who != (meant := f"{kind.strip()}:{named.strip()}"):
        return (f"{who!r} has blanks around its name, which no user or group is named with: "
                f"write {meant!r}")
    return None
