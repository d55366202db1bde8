"""A request's "problem" as a person may read it. It names the approvers' addresses a
notification failed to reach (approvals.notifications.failure_note), and a mail server's
answer often quotes them again: an address is shown only to a person who may see the
notifications themselves (approvals.view_notification, as Django admin's outbox asks), never
to whoever may merely view the run or the request."""

import re

# Wide on purpose: whatever looks like local@domain goes, a mail server's quoting included
# (<ann@example.com>, "ann@example.com").
ADDRESS = re.compile(r"[^\s<>()\[\]{},;:\"'@]+@[^\s<>()\[\]{},;:\"'@]+")
HIDDEN = "[an address]"


def without_addresses(text: str) -> str:
    """`text` with every e-mail address in it replaced by HIDDEN."""
    return ADDRESS.sub(HIDDEN, text)


def may_see_addresses(person) -> bool:
    """Whether `person` may see the addresses notifications went to."""
    return person.has_perm("approvals.view_notification")


def problem_shown_to(person, problem: str) -> str:
    """`problem` for `person`: whole for who may see the notifications, else without the
    addresses it names."""
    if not problem or may_see_addresses(person):
        return problem
    return without_addresses(problem)
