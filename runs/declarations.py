"""What a step declares beside its function (its recovery contract, who approves), and what
its functions return (a lookup's verdict, a result with its remote reference). Part of the
definition API: runs.definition names all of these as its own."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any


@dataclass(frozen=True)
class Contract:
    """A step's recovery contract, shown to operators next to the step. The stop condition
    is not declared: runs.contracts derives it from the rules the runtime applies."""

    evidence: str = ""
    rule: str = ""
    owner: str = ""


APPROVAL_TIMEOUT_POLICIES = ("escalate", "reject", "cancel")


@dataclass(frozen=True)
class ApprovalPolicy:
    """Who may decide an approval step, and what happens while nobody does."""

    approvers: tuple[str, ...]
    remind_every: timedelta
    timeout: timedelta
    on_timeout: str
    escalate_to: tuple[str, ...] = ()


# A tool call nobody decides in time is declined (the model is told; nothing runs), at once
# ("reject") or once the deputies have not decided either ("escalate").
TOOL_APPROVAL_TIMEOUT_POLICIES = ("escalate", "reject")


def tool_approval(*, approvers: tuple[str, ...], remind_every: timedelta = timedelta(hours=8),
                  timeout: timedelta = timedelta(days=1), on_timeout: str = "reject",
                  escalate_to: tuple[str, ...] = ()) -> ApprovalPolicy:
    """Who approves an agent's tool calls that wait for a person, and what happens while
    nobody does: declared on the agent (`wf.agent(..., approval=...)`, for all its tools)
    or on one tool (`@agent.tool(..., approval=...)`). The approvals app asks them as it
    asks an approval step's approvers: an email with a signed link, reminders every
    `remind_every`, and at `timeout` the call is declined ("reject"), or first escalated
    to `escalate_to` and declined at the next timeout ("escalate")."""
    if on_timeout not in TOOL_APPROVAL_TIMEOUT_POLICIES:
        raise ValueError(f"tool approval: on_timeout must be one of "
                         f"{', '.join(TOOL_APPROVAL_TIMEOUT_POLICIES)}, not {on_timeout!r}")
    if on_timeout == "escalate" and not escalate_to:
        raise ValueError("tool approval: on_timeout='escalate' needs escalate_to")
    if not approvers:
        raise ValueError("tool approval: name at least one approver")
    for who in (*approvers, *escalate_to):
        if not who.startswith(("user:", "group:")):
            raise ValueError(f"tool approval: {who!r} is neither 'user:...' nor 'group:...'")
    return ApprovalPolicy(approvers=tuple(approvers), remind_every=remind_every,
                          timeout=timeout, on_timeout=on_timeout,
                          escalate_to=tuple(escalate_to))


@dataclass(frozen=True)
class Found:
    """Reconciliation found the effect: here is its reference in the remote system."""

    ref: str
    result: Any = None


@dataclass(frozen=True)
class NotFound:
    """Reconciliation has durable evidence that the effect did not happen."""


@dataclass(frozen=True)
class Undetermined:
    """Reconciliation could not tell; a person must settle it."""

    reason: str = ""


@dataclass(frozen=True)
class LookupFailed(Undetermined):
    """The lookup itself failed (the receiver's lookup endpoint erred or was unreachable).

    The runtime produces this, reconcile functions do not return it: a lookup is a read, so
    it is asked again with backoff, within the step's lookup budget, before a person is."""


@dataclass(frozen=True)
class StepResult:
    """What a side-effecting step returns: its result and the remote reference (evidence)."""

    value: Any = None
    remote_ref: str = ""
