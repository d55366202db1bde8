"""What a person gives an operator action, as every door (the console's form, the API's
body, the command line's options) hands it over, and what is refused before the action's
transition is asked: one set of rules, so that the same input gets the same answer at each
door."""

import re

from audit.quoting import quoted

from ..machine.errors import TransitionNotAllowed
from ..machine.storable import named_text_problem
from ..machine.transitions.outcome import REMOTE_REF_MAX

# A tool call's id as the run page shows it: its turn, then its index in the turn, in ASCII
# digits ([0-9], not \d, which passes "١.٠": int() would read it as call 1.0).
CALL_ID = r"[0-9]+\.[0-9]+"


class ActionInputError(ValueError):
    """The input for an action is incomplete or inconsistent; nothing was done. `field`: the
    ActionInput field whose value was refused, if one was, for a caller to name as its own.
    `missing`: the field the action needs and was not given, if that is why, for a caller
    to name how it is given (the command line's option)."""

    def __init__(self, message: str, field: str = "", missing: str = ""):
        super().__init__(message)
        self.field = field
        self.missing = missing


def field_refused(name: str, text: str) -> ActionInputError | None:
    """Why the text given for ActionInput field `name` is refused, whichever door it came
    through, or None: what no record can keep (a NUL) in any field, a control character in
    one naming one thing (a reason's and evidence's other controls are the transition's)."""
    problem = named_text_problem(text, one_line=name in ("step", "call", "mode", "remote_ref"))
    label = {"remote_ref": "remote reference", "call": "tool call"}.get(name, name)
    return None if problem is None else ActionInputError(
        f"{label}: {problem}; nothing was done.", name)


def remote_ref_refused(remote_ref: str) -> ActionInputError | None:
    """Why `remote_ref` does not name the effect a person records as found (reconcile by
    hand), or None: none given (`missing`, for a door to say how it is given), or longer
    than a record keeps."""
    ref = remote_ref.strip()
    if not ref:
        return ActionInputError("Give the remote reference of the effect you found.",
                                missing="remote_ref")
    if len(ref) > REMOTE_REF_MAX:
        # A reference cut to fit the column would name another effect, or none. Its field
        # named: the value is to correct (the API's 422, the console's dialog marks it).
        return ActionInputError(
            f"The remote reference is {len(ref)} characters long; a reference holds at most "
            f"{REMOTE_REF_MAX}. Give the reference as the remote system shows it, and "
            "anything longer as evidence.", "remote_ref")
    return None


def target_missing(spec, run, steps, given) -> Exception | None:
    """Why `given` (an ActionInput) names no step, or no tool call, where action `spec` is
    aimed at one, or None. A run whose state refuses the action whatever it is aimed at is
    told that refusal, in the transition's words (TransitionNotAllowed), not asked to choose
    a target it has none of; otherwise the person is asked for the target, told which steps
    the run allows. Every door raises what this returns: the console's form and the API's
    body through OperatorAction.perform, the command line before it asks for a password."""
    call_missing = spec.takes_call and not given.call
    if not call_missing and not (spec.takes_step and not given.step):
        return None
    refused = spec.refusal(run, steps)
    if refused is not None:
        return TransitionNotAllowed(refused)
    names = ", ".join(s.name for s in spec.eligible_steps(run, steps))
    if call_missing:
        return ActionInputError(f"{spec.label} is aimed at one tool call: choose it, by its "
                                "step and its turn.index as the run page shows them (run "
                                f"{run.pk} allows calls of {names}); nothing was done.")
    return ActionInputError(f"{spec.label} is aimed at one step: choose it (run {run.pk} "
                            f"allows {names}); nothing was done.")


# Why a tool call given without its step names none: TURN.INDEX counts the calls of one agent
# step, so "1.0" is a call of every agent step. Every door says it; the command line adds
# how its --call names the step.
CALL_WITHOUT_STEP = "a tool call is named with its agent step (TURN.INDEX counts that step's calls)"


def call_refused(step: str, call: str) -> ActionInputError | None:
    """Why the tool call `call` (of step `step`) given for any action is refused, or None:
    not written TURN.INDEX (call_id_problem), or given without its step. Either is input to
    correct at the door, whatever the action (no action reads a call without its step), not
    a target the run's state is asked about: refused naming the field before the run is
    looked at, where a well-formed call the run lacks is the transition's refusal."""
    if call and (problem := call_id_problem(call)) is not None:
        return ActionInputError(f"tool call {quoted(call)}: {problem}; nothing was done.",
                                "call")
    if call and not step:
        return ActionInputError(f"step: {CALL_WITHOUT_STEP}; give the step too; nothing was "
                                "done.", "step")
    return None


def call_id_problem(ref: str) -> str | None:
    """Why `ref` is not written as a tool call's id (TURN.INDEX), or None: the one reading
    of the id that every door takes (the console's form, the API's body, the command line's
    --call after its STEP:), in one set of words, each door naming its own field. A
    well-formed id that names no call of the run is another answer: the transition's
    refusal, which names the id."""
    if re.fullmatch(CALL_ID, ref):
        return None
    return "the call is TURN.INDEX, as the run page shows it (e.g. 2.0)"
