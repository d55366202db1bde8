"""What a step declares (StepDef: its kind, impact, retry policy and functions; its recovery
contract, who approves), and what its functions return (a lookup's verdict, a result with its
remote reference). Part of the definition API: runs.definitions.definition names all of these as its
own."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from . import approval_checks, validation
from .retry import DEFAULT_POLICY, RetryPolicy

READ, DECISION, WRITE, NOTIFY, APPROVAL = "read", "decision", "write", "notify", "approval"
# A model that chooses its tools, turn after turn (runs.definitions.definition.AgentSpec).
AGENT = "agent"
# A durable timer: the run sleeps, holding no process, until a time
# (runs.machine.transitions.timers).
SLEEP = "sleep"
# A wait for an external event matched by a correlation key (runs.machine.transitions.events).
EVENT = "event"
STEP_KINDS = (READ, DECISION, WRITE, NOTIFY, APPROVAL, AGENT, SLEEP, EVENT)
# What an event wait does when its timeout passes with no event: the step fails (the run
# goes to attention), the run goes to a person still waiting (who may deliver or skip), or
# the run continues with the declared default.
EVENT_TIMEOUT_POLICIES = ("fail", "escalate", "continue")
LOW, HIGH = "low", "high"


@dataclass(frozen=True)
class Contract:
    """A step's recovery contract, shown to operators next to the step. The stop condition
    is not declared: runs.definitions.contracts derives it from the rules the runtime applies."""

    evidence: str = ""
    rule: str = ""
    owner: str = ""


APPROVAL_TIMEOUT_POLICIES = ("escalate", "reject", "cancel")


@dataclass(frozen=True)
class ApprovalPolicy:
    """Who may decide an approval step, and what happens while nobody does."""

    approvers: tuple[str, ...]
    remind_every: timedelta | None  # None: never reminded
    timeout: timedelta
    on_timeout: str
    escalate_to: tuple[str, ...] = ()


# A tool call nobody decides in time is declined (the model is told; nothing runs), at once
# ("reject") or once the deputies have not decided either ("escalate").
TOOL_APPROVAL_TIMEOUT_POLICIES = ("escalate", "reject")


def tool_approval(*, approvers: tuple[str, ...],
                  remind_every: timedelta | None = timedelta(hours=8),
                  timeout: timedelta = timedelta(days=1), on_timeout: str = "reject",
                  escalate_to: tuple[str, ...] = ()) -> ApprovalPolicy:
    """Who approves an agent's tool calls that wait for a person, and what happens while
    nobody does: declared on the agent (`wf.agent(..., approval=...)`, for all its tools)
    or on one tool (`@agent.tool(..., approval=...)`). The approvals app asks them as it
    asks an approval step's approvers: an email with a signed link, reminders every
    `remind_every` (None: none), and at `timeout` the call is declined ("reject"), or first
    escalated to `escalate_to` and declined at the next timeout ("escalate")."""
    approval_checks.check_approvers(
        "tool approval", approvers=approvers, escalate_to=escalate_to,
        remind_every=remind_every, timeout=timeout, on_timeout=on_timeout,
        policies=TOOL_APPROVAL_TIMEOUT_POLICIES)
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
class LookupUnreadable(Undetermined):
    """The lookup could not open a sealed value it is asked with (a tool call's arguments,
    an earlier result its reconcile function reads): a key FIELD_ENCRYPTION_KEYS no longer
    holds (errors.classify, the unreadable class; the reason names the key and the cure).

    The runtime produces this, reconcile functions do not return it. No try opens the value
    before a person puts the key back, so it spends no lookup budget: the run waits for them
    (AttentionReason.SEALED_VALUE_UNREADABLE), the outcome still unknown."""


@dataclass(frozen=True)
class StepResult:
    """What a side-effecting step returns: its result and the remote reference (evidence)."""

    value: Any = None
    remote_ref: str = ""


@dataclass(frozen=True)
class AgentBudget:
    """How far an agent step may go before a person is asked: model turns, tool calls and
    tokens (prompt and completion) over the whole step. Each limit is checked with the agent
    that declares it (runs.definitions.validation.budget_problem), so that its refusal names
    the workflow and the step."""

    max_turns: int = 10
    max_tool_calls: int = 20
    max_tokens: int = 100_000
    # The most tool calls one model turn may ask for (None: the installation's
    # RUNS_AGENT_TURN_MAX_TOOL_CALLS, which also caps this). An agent that should act a
    # call or two at a time says so here: a turn asking for more is refused whole.
    max_calls_per_turn: int | None = None


@dataclass
class StepDef:
    workflow: Any  # the runs.definitions.definition.Workflow that declares it
    name: str
    kind: str
    fn: Callable
    impact: str = LOW
    version: int = 1
    retry: RetryPolicy = DEFAULT_POLICY
    contract: Contract = field(default_factory=Contract)
    schema: type[BaseModel] | None = None
    format_failure_budget: int = 0
    honours_key: bool = False
    # After a timeout, a receiver that ignores keys may still be working on the request, so
    # "not found" becomes evidence only once this many seconds have passed.
    lookup_delay: float = 10.0
    # How many failed lookups by key (errors, not answers) before a person is asked.
    lookup_attempts: int = 3
    approval: ApprovalPolicy | None = None
    # An approval step: (snapshot) -> bool, whether a person approves it (False: the
    # workflow's rule approves it, nobody is asked; runs.machine.transitions.approval_rules).
    approve_if: Callable[[dict], bool] | None = None
    # A sleep step: for how long, or until when (a function of the run's input).
    sleep_for: timedelta | None = None
    sleep_until: Callable[[dict], Any] | None = None
    # An event step: the event's name, its correlation key from the run's input (None: the
    # business key), how long to wait and what then (EVENT_TIMEOUT_POLICIES).
    event_name: str = ""
    correlate: Callable[[dict], str] | None = None
    timeout: timedelta | None = None
    on_timeout: str = ""
    default: Any = None
    reconcile_fn: Callable | None = None
    compensate_fn: Callable | None = None
    # The system the step calls (reads, changes, or asks as a model), named for people ("the
    # tracker"), for its rate limit and for a dispatch pause towards it.
    system: str = ""
    # Builds, from the input and earlier results and without calling anything, one line
    # saying what the step will do ("post 1,200.00 EUR to expenses:software for INV-1847").
    describe_fn: Callable | None = None
    # Builds, from the input and earlier results and without calling anything, what the
    # compensation will send (for a correction message: recipient, subject, body). Shown to
    # the person who confirms the undo of a high-impact step.
    compensation_preview_fn: Callable | None = None
    # Fields of the step's result stored encrypted (runs.machine.sensitive) in every table, artifact
    # and archive file; later steps read them in clear through ctx.results.
    sensitive: tuple[str, ...] = ()

    def __post_init__(self):
        # Every kind of step is built here, so every declaration passes the same checks
        # when its module is imported (runs.definitions.validation).
        validation.check_step(self, impacts=(LOW, HIGH), contract=Contract)
        self.sensitive = tuple(self.sensitive)

    def __call__(self, ctx):
        return self.fn(ctx)

    def reconcile(self, fn: Callable) -> Callable:
        """Declare how to look this step's effect up by its key."""
        validation.check_changes_something(self, "reconcile")
        validation.check_step_function(self, fn, role="reconcile function",
                                       declared=self.reconcile_fn)
        self.reconcile_fn = fn
        return fn

    def compensate(self, fn: Callable) -> Callable:
        """Declare the business action that undoes this step (cancel, reverse, correct)."""
        validation.check_changes_something(self, "compensate")
        validation.check_step_function(self, fn, role="compensate function",
                                       declared=self.compensate_fn)
        self.compensate_fn = fn
        return fn

    def describe(self, fn: Callable) -> Callable:
        """Declare the one line that says what this step will do, computed from the input
        and earlier results. It is stored with the intent checkpoint and shown to people."""
        validation.check_step_function(self, fn, role="describe function",
                                       declared=self.describe_fn)
        self.describe_fn = fn
        return fn

    @property
    def plain_description(self) -> str:
        """What the step does when it declares no description: its kind and system."""
        where = f" in {self.system}" if self.system else ""
        return {READ: f"read{where}", DECISION: "ask the model for a decision",
                WRITE: f"change{where or ' another system'}",
                NOTIFY: f"send a message{where}",
                APPROVAL: "wait for a person's approval" + (
                    ", unless its rule approves" if self.approve_if is not None else ""),
                AGENT: "let the model choose its tools",
                SLEEP: "sleep until its time",
                EVENT: f"wait for the event {self.event_name}"}[self.kind]

    def compensation_preview(self, fn: Callable) -> Callable:
        """Declare what this step's compensation will send, built without sending it: the
        undo of a high-impact step waits for a person, who sees this first."""
        validation.check_changes_something(self, "compensate")
        validation.check_step_function(self, fn, role="compensation preview",
                                       declared=self.compensation_preview_fn)
        self.compensation_preview_fn = fn
        return fn

    @property
    def has_side_effect(self) -> bool:
        return self.kind in (WRITE, NOTIFY)
