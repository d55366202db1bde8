"""What one call of a step function, a tool or an undo ended with."""

import json
from dataclasses import dataclass

from ...models import ErrorClass, Step
from ..errors import Classified, described
from ..storable import printable, text_problem, value_problem

# The width of the remote reference column of a step and of a tool call (the same).
REMOTE_REF_MAX = Step._meta.get_field("remote_ref").max_length
# The most of a rejected output kept for diagnosis, in characters of its JSON form (a
# model's unusable answer is cut to it first: runs.agents.agent_loop.kept_answer): a model
# answering megabytes would otherwise put them whole in the step's row, at every attempt.
INVALID_OUTPUT_MAX = 4000


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    value: object = None
    remote_ref: str = ""
    error: Classified | None = None
    invalid_output: object = None

    @classmethod
    def failure(cls, error: Classified) -> "Outcome":
        """A call that failed with `error` (one not made: its limiter refused it)."""
        return cls(succeeded=False, error=error)

    def __post_init__(self):
        # A rejected model output is kept for diagnosis; one the database cannot store is
        # kept as its Python form, which writes out every character visibly.
        if self.invalid_output is not None and value_problem(self.invalid_output):
            object.__setattr__(self, "invalid_output", _python_form(self.invalid_output))
        if self.invalid_output is not None:
            object.__setattr__(self, "invalid_output", _bounded(self.invalid_output))


def _bounded(output):
    """`output` as kept: whole within INVALID_OUTPUT_MAX characters of its JSON form, else
    that form's beginning, saying how long it was."""
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if len(text) <= INVALID_OUTPUT_MAX:
        return output
    return f"{text[:INVALID_OUTPUT_MAX]}… (cut: {len(text):,} characters in all)"


def _python_form(output) -> str:
    """The repr of a rejected output, or, where its repr raises (an object of the model
    client's own), its type and why: the record of the rejection must still be written."""
    try:
        text = repr(output)
    except Exception as exc:
        return f"<a {type(output).__name__} whose repr raised {described(exc)}>"
    if not isinstance(text, str):
        return f"<a {type(output).__name__} whose repr is no text>"
    return printable(str.__str__(text))


def unstorable_result(what: str, value, remote_ref: str) -> Outcome | None:
    """The outcome of a call that returned what the database cannot store (an object JSON
    has no form for, a NUL in a text, a nesting deeper than any parser goes), or None.

    Unclassified: a person looks at the code that returned it. Recording the value as it is
    would fail the outcome checkpoint itself, again at every attempt."""
    problem = value_problem(value)
    if problem is None and remote_ref:
        try:
            # The caller stores str(remote_ref): a reference whose __str__ raises is refused.
            ref = str.__str__(str(remote_ref))
            ref_problem = text_problem(ref) or reference_too_long(ref)
        except Exception as exc:
            ref_problem = f"it cannot be read as text ({described(exc)})"
        problem = f"{ref_problem} (in its remote reference)" if ref_problem else None
    if problem is None:
        return None
    return Outcome(succeeded=False, error=Classified(
        ErrorClass.UNCLASSIFIED, f"{what} returned a value that cannot be stored: {problem}"))


def reference_too_long(ref: str) -> str | None:
    """Why a remote reference cannot be kept whole, or None. A reference names the effect:
    one cut to fit its column could name another, so it is refused, never cut, whoever
    returned it (a step, a tool, an undo, a lookup)."""
    if len(ref) <= REMOTE_REF_MAX:
        return None
    return f"it is {len(ref):,} characters long, longer than the {REMOTE_REF_MAX} kept"
