"""Four eyes for operators: the actions a second person's approval sets off, by name.

The console registers, once per process (in an AppConfig.ready(), so that web servers and
Celery workers alike know them), a function per action:

    from approvals.operator_actions import register_operator_action
    from runs import transitions

    @register_operator_action("terminate")
    def terminate(*, run_id, requested_by, approved_by, reason, params):
        transitions.terminate(run_id, actor=requested_by, reason=reason,
                              data={"approved_by": approved_by.label})

and asks for the approval with approvals.services.request_operator_action(run,
action="terminate", requested_by=user, reason=...). Once another person approves, the
function is called with keyword arguments: run_id (int), requested_by and approved_by
(audit.chain.Actor), reason (str) and params (the dict given with the request). It runs
after the decision has committed and outside any transaction, so it may call runs'
transitions. It must be safe to call again: if the process dies between the action and
recording that it ran, the sweeper calls it again, and a transition that refuses because it
already happened (TransitionNotAllowed) is recorded on the request as the reason it was not
applied twice.
"""

from collections.abc import Callable

OperatorAction = Callable[..., object]

_actions: dict[str, OperatorAction] = {}


def register_operator_action(name: str, fn: OperatorAction | None = None):
    """Register `fn` as what approving a four-eyes request for `name` does. Usable as a
    decorator. Registering another function under a taken name is refused."""
    if not name or not isinstance(name, str):
        raise ValueError("an operator action needs a name")

    def register(fn: OperatorAction) -> OperatorAction:
        existing = _actions.get(name)
        if existing is not None and existing is not fn:
            raise ValueError(f"operator action {name!r} is already registered ({existing!r})")
        _actions[name] = fn
        return fn

    return register(fn) if fn is not None else register


def unregister_operator_action(name: str) -> None:
    _actions.pop(name, None)


def operator_action(name: str) -> OperatorAction | None:
    return _actions.get(name)


def registered_operator_actions() -> list[str]:
    return sorted(_actions)
