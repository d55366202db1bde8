"""The console's side of an operator action: turn the posted form into a request for the
action in runs.actions (the one table), or, where the transition's four-eyes rule says a
second person must approve, into an approval request for that person."""

from approvals.four_eyes import request_operator_action
from audit.chain import Actor
from runs.actions import ACTIONS, ActionInput, ActionInputError
from runs.models import Run, Step

__all__ = ["ActionInputError", "perform", "input_from"]


def input_from(data) -> ActionInput:
    """The action's input from a posted form (or any mapping of strings)."""
    def field(name: str, default: str = "") -> str:
        return (data.get(name) or default).strip()

    return ActionInput(reason=field("reason"), step=field("step"), mode=field("mode", "ask"),
                   remote_ref=field("remote_ref"), evidence=field("evidence"),
                   call=field("call"))


def perform(action: str, run: Run, *, user, data) -> str:
    """Carry out `action` on `run` for `user` with the posted `data`, and say what was done.

    An action the four-eyes rule covers becomes a request for a second person's approval
    instead. Raises ActionInputError for missing input and TransitionNotAllowed if the run's
    state does not allow it (both leave everything as it was)."""
    spec = ACTIONS[action]
    given = input_from(data)
    steps = list(Step.objects.filter(run=run).order_by("position"))
    if spec.needs_second_person(steps):
        # Asking a second person for what the transition would refuse only wastes theirs;
        # the reason is required by request_operator_action, as by every transition.
        refused = spec.refusal(run, steps)
        if refused:
            raise ActionInputError(refused)
        approval, created = request_operator_action(
            run, action=action, requested_by=user, reason=given.reason,
            params={"step": given.step} if given.step else None)
        return (f"A second person must approve this: approval request {approval.pk} "
                f"{'created' if created else 'already waits'}; nothing was done yet.")
    spec.perform(run.pk, actor=Actor.for_user(user), given=given)
    return f"{spec.label}: done."
