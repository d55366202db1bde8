"""The console's side of an operator action: the posted form as the action's input. The
action itself, with its checks, is approvals.operator_actions.act."""

from runs.actions import ActionInput

__all__ = ["input_from"]


def input_from(data) -> ActionInput:
    """The action's input from a posted form (or any mapping of strings)."""
    def field(name: str, default: str = "") -> str:
        return (data.get(name) or default).strip()

    return ActionInput(reason=field("reason"), step=field("step"), mode=field("mode", "ask"),
                       remote_ref=field("remote_ref"), evidence=field("evidence"),
                       call=field("call"))
