"""What a workflow's approval rule (`approve_if`, the author's code) answers, read one way
for a tool's call (asked with its arguments) and an approval step (asked with its
snapshot): only False lets the effect through with nobody asked. True asks a person; so
does a rule that cannot be read (it raises, or answers neither True nor False: a forgotten
`return` answers None), which is logged, as the author's rule is at fault. A rule is never
what lets an effect through unasked by mistake."""

import logging

from ..definitions import definition
from .errors import CODE_FAILURES, raise_if_process_stopping

logger = logging.getLogger(__name__)


def person_asked(rule, value, *, where: str) -> bool:
    """Whether `rule(value)` leaves the decision to a person; `where` names the step or the
    tool in the log line of a rule that cannot be read."""
    try:
        answer = rule(value)
    except CODE_FAILURES as exc:
        raise_if_process_stopping(exc)
        logger.exception("%s: approve_if raised; a person decides", where)
        return True
    if answer is False:
        return False
    if answer is not True:
        logger.warning("%s: approve_if answered a %s, neither True nor False; a person "
                       "decides", where, type(answer).__name__)
    return True


def call_asks_a_person(tool, args) -> bool:
    """Whether a call of `tool` (a definition.ToolSpec) with `args` waits for a person's
    approval first: as its approve_if answers (person_asked), or, where it declares none,
    when it is a high-impact write or notification."""
    if tool.approve_if is not None:
        return person_asked(tool.approve_if, args, where=f"tool {tool.name}")
    return tool.impact == definition.HIGH and tool.has_side_effect
