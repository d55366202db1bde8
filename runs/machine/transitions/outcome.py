"""What one call of a step function, a tool or an undo ended with."""

from dataclasses import dataclass

from ...models import ErrorClass
from ..errors import Classified
from ..storable import text_problem, value_problem


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    value: object = None
    remote_ref: str = ""
    error: Classified | None = None
    invalid_output: object = None

    def __post_init__(self):
        # A rejected model output is kept for diagnosis; one the database cannot store is
        # kept as its Python form, which writes out every character visibly.
        if self.invalid_output is not None and value_problem(self.invalid_output):
            object.__setattr__(self, "invalid_output", repr(self.invalid_output))


def unstorable_result(what: str, value, remote_ref: str) -> Outcome | None:
    """The outcome of a call that returned what the database cannot store (an object JSON
    has no form for, a NUL in a text, a nesting deeper than any parser goes), or None.

    Unclassified: a person looks at the code that returned it. Recording the value as it is
    would fail the outcome checkpoint itself, again at every attempt."""
    problem = value_problem(value)
    if problem is None and remote_ref:
        ref_problem = text_problem(str(remote_ref))
        problem = f"{ref_problem} (in its remote reference)" if ref_problem else None
    if problem is None:
        return None
    return Outcome(succeeded=False, error=Classified(
        ErrorClass.UNCLASSIFIED, f"{what} returned a value that cannot be stored: {problem}"))
