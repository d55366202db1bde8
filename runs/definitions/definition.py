"""The definition API: workflows and their steps, declared in Python.

    onboarding = Workflow("customer-onboarding", version=1, input=OnboardingIn)

    @onboarding.write("create-customer", contract=Contract(...))
    def create_customer(ctx): ...

    @create_customer.reconcile
    def find_customer(ctx): ...     # Found(ref) / NotFound() / Undetermined(why)

A definition says what each step is and how to recover it; the runtime does the rest. Step
functions never open transactions, never touch Run or Step rows and never see a secret: they
get a StepContext.
"""

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ValidationError

from . import approval_checks, validation, wait_checks

# What a step declares (its contract, its approvers) and what its functions return (lookup
# verdicts, results) live in runs.definitions.declarations; this module's API names them as its own.
from .declarations import (  # noqa: F401
    AGENT,
    APPROVAL,
    APPROVAL_TIMEOUT_POLICIES,
    DECISION,
    EVENT,
    EVENT_TIMEOUT_POLICIES,
    HIGH,
    LOW,
    NOTIFY,
    READ,
    SLEEP,
    STEP_KINDS,
    TOOL_APPROVAL_TIMEOUT_POLICIES,
    WRITE,
    AgentBudget,
    ApprovalPolicy,
    Contract,
    Found,
    LookupFailed,
    LookupUnreadable,
    NotFound,
    StepDef,
    StepResult,
    Undetermined,
    tool_approval,
)

# The catalogue of registered workflows lives in runs.definitions.registry;
# runs.definitions.definition names it.
from .input_errors import shown_location
from .registry import Registry, registry  # noqa: F401
from .retry import DEFAULT_POLICY, RetryPolicy
from .step_index import StepList, find_step


class Workflow:
    """A named, versioned sequence of steps with a validated input schema."""

    def __init__(self, name: str, *, version: int, input: type[BaseModel],
                 services: Callable[[], Any] | None = None, auto_compensate: bool = False,
                 example: dict | None = None, register: bool = True,
                 retention_days: int | None = None, approval_example: dict | None = None):
        """`services` builds the clients steps reach as ctx.services (closed after each
        claim if they have a close()). `auto_compensate`: when a step fails with evidence that
        nothing changed, undo the completed steps without waiting for a person, provided all
        of them are low impact. `example` is a valid input, used by the drill kit;
        `approval_example` one for which a person is asked: to approve an agent's tool call,
        or an approval step whose rule (approve_if) lets `example` through (the kit's
        approval drills, 7a and 7b).
        `retention_days`: how long its finished runs stay in the hot tables before the
        archive app moves them to an archive file (None: the RUNS_RETENTION_DAYS setting)."""
        self.name = name
        self.version = version
        self.input_schema = input
        validation.check_workflow(self)
        self.services_factory = services
        self.auto_compensate = auto_compensate
        self.example = example
        self.approval_example = approval_example
        self.retention_days = retention_days
        self.steps: list[StepDef] = StepList()
        validation.check_workflow_options(self)
        if register:
            registry.register(self)

    def __repr__(self):
        return f"<Workflow {self.name} v{self.version}>"

    def parse_input(self, data, *, to_its_sender: bool = False
                    ) -> tuple[BaseModel | None, list[dict]]:
        """The input as this version's schema parses it, or None and what is wrong with it.
        Told `to_its_sender` (a refused start), where and why as the schema says it; else
        (a message that is stored) never the values: a key of the input's own is shown as
        [key], and a check of the schema's own code, which may quote the value it refused,
        by its kind only."""
        try:
            return self.input_schema.model_validate(data), []
        except ValidationError as exc:
            errors = exc.errors(include_input=False)
        if to_its_sender:
            return None, [{"loc": list(e["loc"]), "msg": e["msg"]} for e in errors]
        return None, [{"loc": shown_location(self.input_schema, e["loc"]),
                       "msg": ("refused by the schema's own check"
                               if "error" in e.get("ctx", {}) else e["msg"])}
                      for e in errors]

    def strict_input(self, data: dict) -> tuple[BaseModel | None, list[dict]]:
        """`data` (JSON's values) read strictly against this version's schema, as the API
        publishes it: each field's JSON type as declared ("5" is no integer), whatever the
        runtime's own coercions, which parse_input allows. The input parsed, or None and
        what is wrong (each error's loc within the input, msg and type)."""
        try:
            return self.input_schema.model_validate_json(json.dumps(data), strict=True), []
        except ValidationError as exc:
            return None, [_as_sent(e) for e in exc.errors(include_input=False)]

    def step(self, name: str) -> StepDef:
        if (found := step_of(self, name)) is None:
            raise KeyError(f"workflow {self.name} v{self.version} has no step {name!r}")
        return found

    def _declare(self, kind: str, name: str, **options) -> Callable[[Callable], StepDef]:
        # What the step declares is checked when the StepDef is built
        # (runs.definitions.validation), its function with it.
        validation.check_named(self, kind, name)

        def decorator(fn: Callable) -> StepDef:
            step = StepDef(workflow=self, name=name, kind=kind, fn=fn, **options)
            validation.check_unique_name(self, step)
            self.steps.append(step)
            return step

        return decorator

    def read(self, name: str, *, retry: RetryPolicy = DEFAULT_POLICY, version: int = 1,
             contract: Contract | None = None, sensitive: tuple[str, ...] = (),
             system: str = ""):
        """A step without side effects, retried freely by its policy. `sensitive` names
        fields of its result stored encrypted (as for every kind of step). `system` names the
        system it reads, whose rate limit and Retry-After it keeps (runs.machine.limits), as
        a write to that system does."""
        return self._declare(READ, name, retry=retry, version=version,
                             contract=contract or Contract(rule="retry"),
                             sensitive=sensitive, system=system)

    def decision(self, name: str, *, schema: type[BaseModel], format_failure_budget: int = 2,
                 retry: RetryPolicy = DEFAULT_POLICY, version: int = 1,
                 contract: Contract | None = None, sensitive: tuple[str, ...] = (),
                 system: str = ""):
        """Ask a model for a proposal validated against `schema`; the accepted one is stored
        and reused on every replay. `system` names the model's endpoint, for its rate limit,
        as an agent's `model_system` does."""
        return self._declare(DECISION, name, schema=schema, retry=retry, version=version,
                             format_failure_budget=format_failure_budget,
                             contract=contract or Contract(rule="stored decision reused"),
                             sensitive=sensitive, system=system)

    def write(self, name: str, *, impact: str = LOW, retry: RetryPolicy = DEFAULT_POLICY,
              version: int = 1, contract: Contract | None = None, honours_key: bool = False,
              lookup_delay: float = 10.0, lookup_attempts: int = 3, system: str = "",
              sensitive: tuple[str, ...] = ()):
        """A step that changes another system. It sends ctx.key; `honours_key` says whether
        the receiver deduplicates on it, which makes a resend after an unknown outcome safe.
        For a receiver that does not, a lookup that finds nothing is trusted only
        `lookup_delay` seconds after the unknown outcome (the request may still be in
        flight). A lookup that fails is asked again, `lookup_attempts` times in all, before
        a person is asked. `system` names the system it changes, for people."""
        return self._declare(WRITE, name, impact=impact, retry=retry, version=version,
                             contract=contract or Contract(), honours_key=honours_key,
                             lookup_delay=lookup_delay, lookup_attempts=lookup_attempts,
                             system=system, sensitive=sensitive)

    def notify(self, name: str, *, impact: str = HIGH, retry: RetryPolicy = DEFAULT_POLICY,
               version: int = 1, contract: Contract | None = None, honours_key: bool = False,
               lookup_delay: float = 10.0, lookup_attempts: int = 3, system: str = "",
               sensitive: tuple[str, ...] = ()):
        """A message delivery to a person; the provider's message id is stored as the remote
        reference. High impact unless declared otherwise: a message cannot be taken back, so
        it is not resent after an unknown outcome, nor corrected, without a person.
        The other options as for write."""
        return self._declare(NOTIFY, name, impact=impact, retry=retry, version=version,
                             contract=contract or Contract(), honours_key=honours_key,
                             lookup_delay=lookup_delay, lookup_attempts=lookup_attempts,
                             system=system, sensitive=sensitive)

    def sleep(self, name: str, *, duration: timedelta | None = None,
              until: Callable[[dict], Any] | None = None) -> StepDef:
        """A durable timer: the run sleeps for `duration`, or until the aware datetime
        `until(input)` returns, holding no process; the sweeper wakes it, and an operator can
        wake it early with a reason. A start `until` fails with is refused (wait_functions).
        Not a decorator: it declares the step itself."""
        wait_checks.check_sleep(self, name, duration=duration, until=until)
        return self._declare(SLEEP, name, sleep_for=duration, sleep_until=until,
                             contract=Contract(rule="wait for the time"))(lambda ctx: None)

    def wait_for_event(self, name: str, *, event: str, schema: type[BaseModel] | None = None,
                       correlate: Callable[[dict], str] | None = None,
                       timeout: timedelta | None = None, on_timeout: str = "escalate",
                       default: Any = None) -> StepDef:
        """A durable wait for the external event `event` whose correlation key is
        `correlate(input)` (by default the run's business key). Its payload, validated
        against `schema`, becomes the step's result. An event that arrives before the run
        gets here is kept and consumed when it does. After `timeout`, `on_timeout` applies
        (EVENT_TIMEOUT_POLICIES; "continue" goes on with `default` as the result). Not a
        decorator: it declares the step itself. A start `correlate` fails with is refused."""
        wait_checks.check_event_wait(self, name, event=event, timeout=timeout,
                                     on_timeout=on_timeout, policies=EVENT_TIMEOUT_POLICIES,
                                     default=default, schema=schema)
        return self._declare(EVENT, name, event_name=event, schema=schema, correlate=correlate,
                             timeout=timeout, on_timeout=on_timeout, default=default,
                             contract=Contract(rule="wait for the event"))(lambda ctx: None)

    def approval(self, name: str, *, approvers: tuple[str, ...], version: int = 1,
                 remind_every: timedelta | None = timedelta(hours=24),
                 timeout: timedelta = timedelta(days=3), on_timeout: str = "escalate",
                 escalate_to: tuple[str, ...] = (), contract: Contract | None = None,
                 approve_if: Callable[[dict], bool] | None = None):
        """A durable wait for a person's decision; the approvals app asks and records it.

        The step function returns the snapshot a person approves (amounts, vendor, the
        model's classification and its reasons), built from earlier results; it must not
        call anything. `approvers` and `escalate_to` name users ("user:ann") and groups
        ("group:finance-approvers"), reminded every `remind_every` (None: never reminded,
        told once when the request opens). At `timeout` the policy `on_timeout` applies:
        "escalate" (to `escalate_to`), "reject" or "cancel" (the run goes to attention).
        `approve_if(snapshot)`, when given, is asked first with the snapshot as a person
        would be shown it: True, a person approves as above; False, the workflow's rule
        approves and nobody is asked; anything else (it raises, the snapshot cannot be
        made) leaves the decision to a person (runs.machine.transitions.approval_rules).
        """
        approval_checks.check_approvers(validation.where(self, name), approvers=approvers,
                                        escalate_to=escalate_to, remind_every=remind_every,
                                        timeout=timeout, on_timeout=on_timeout,
                                        policies=APPROVAL_TIMEOUT_POLICIES)
        return self._declare(
            APPROVAL, name, impact=HIGH, version=version,
            contract=contract or Contract(rule="human confirmation"),
            approval=ApprovalPolicy(approvers=tuple(approvers), remind_every=remind_every,
                                    timeout=timeout, on_timeout=on_timeout,
                                    escalate_to=tuple(escalate_to)),
            approve_if=approve_if,
        )

    def agent(self, name: str, *, system_prompt: str, model: str = "",
              budget: "AgentBudget | None" = None, schema_error_budget: int = 2,
              retry: RetryPolicy = DEFAULT_POLICY, version: int = 1,
              contract: Contract | None = None,
              approval: ApprovalPolicy | None = None, context_budget: int = 0,
              keep_turns: int = 2, model_system: str = "") -> "AgentSpec":
        """An agent step: a model (through the openai client, against settings.MODEL_BASE_URL;
        `model` defaults to settings.MODEL_NAME) that chooses which of the step's tools to call
        for several turns, within `budget`. Every turn is stored before any tool it asks for
        runs; every tool call is a checkpointed, keyed child of the step. `retry` applies to
        the model calls. `approval` (see tool_approval) says who approves the tool calls
        that wait for a person, unless a tool declares its own. `context_budget` (estimated
        tokens, 0: none) bounds what each model turn is sent: past it, the turns before the
        last `keep_turns` are summarised by a stored model turn (see runs.agents.agent_history).
        `model_system` names the model endpoint as a remote system, whose rate limit
        (runs.machine.limits.rate_limit) and Retry-After its turns keep, as tool calls keep
        their tools' `system`."""
        spec = AgentSpec(workflow=self, name=name, kind=AGENT, fn=_undo_tool_calls,
                         version=version, retry=retry,
                         contract=contract or Contract(rule="each tool call reconciled by its "
                                                            "key; turns stored and reused"),
                         model=model, system_prompt=system_prompt,
                         budget=budget or AgentBudget(),
                         schema_error_budget=schema_error_budget, approval=approval,
                         context_budget=context_budget, keep_turns=keep_turns,
                         model_system=model_system)
        validation.check_agent(spec)
        validation.check_unique_name(self, spec)
        self.steps.append(spec)
        return spec



# --- agent steps ---------------------------------------------------------------------------
#
#     triage = invoice.agent("triage", system_prompt="...", budget=AgentBudget(max_turns=8))
#
#     @triage.tool("post-ledger", kind=WRITE, impact=HIGH, honours_key=True,
#                  args=PostLedgerArgs, redact=("iban",))
#     def post_ledger(ctx, args): ...      # ctx.key: this tool call's own idempotency key
#
#     @post_ledger.reconcile
#     def find_entry(ctx, args): ...       # Found(ref) / NotFound() / Undetermined(why)
#
# The model chooses which tool to call with which arguments; each call is a recorded child
# of the step with its own key, state, attempts and evidence (runs.agents.agent_loop runs them).

@dataclass
class ToolSpec:
    """One tool an agent may call, declared like a step: its kind, impact, whether its
    receiver honours keys, the schema of its arguments, and how to look its effect up by
    key (reconcile) and undo it (compensate). Its functions take (ctx, args): a
    StepContext whose key is the tool call's own key, and the validated arguments."""

    agent: "AgentSpec"
    name: str
    kind: str
    fn: Callable
    args: type[BaseModel]
    impact: str = LOW
    honours_key: bool = False
    # Sensitive fields of its args (checked against them): shown as [redacted] wherever the
    # call is displayed or audited, and stored encrypted (runs.machine.sensitive) in its
    # arguments and results, in every table and archive file; `sensitive`: of its result alone.
    redact: tuple[str, ...] = ()
    sensitive: tuple[str, ...] = ()
    retry: RetryPolicy = DEFAULT_POLICY
    lookup_delay: float = 10.0
    lookup_attempts: int = 3
    # (args) -> bool: whether this call waits for a person's approval of its arguments.
    # Unset: every call of a high-impact tool does.
    approve_if: Callable | None = None
    # Who approves such a call (see tool_approval). Unset: the agent's.
    approval: ApprovalPolicy | None = None
    description: str = ""
    system: str = ""
    reconcile_fn: Callable | None = None
    compensate_fn: Callable | None = None

    def __post_init__(self):
        # As with StepDef, every tool is checked when its module is imported, not once chosen.
        validation.check_tool(self, kinds=(READ, WRITE, NOTIFY), impacts=(LOW, HIGH))
        self.redact, self.sensitive = tuple(self.redact), tuple(self.sensitive)

    @property
    def has_side_effect(self) -> bool:
        return self.kind in (WRITE, NOTIFY)

    @property
    def may_need_approval(self) -> bool:
        return self.approve_if is not None or (self.impact == HIGH and self.has_side_effect)

    @property
    def approval_policy(self) -> ApprovalPolicy | None:
        """Who approves this tool's calls: the tool's policy, or else the agent's."""
        return self.approval or self.agent.approval

    def reconcile(self, fn: Callable) -> Callable:
        """Declare how to look this tool's effect up by the call's key."""
        validation.check_changes_something(self, "reconcile")
        validation.check_tool_function(self, fn, "reconcile")
        self.reconcile_fn = fn
        return fn

    def compensate(self, fn: Callable) -> Callable:
        """Declare the business action that undoes one call of this tool."""
        validation.check_changes_something(self, "compensate")
        validation.check_tool_function(self, fn, "compensate")
        self.compensate_fn = fn
        # The agent step now has something to undo: it joins the run's compensation plan
        # (and gets a compensation key when a run starts).
        self.agent.compensate_fn = _undo_tool_calls
        return fn

    def openai_tool(self) -> dict:
        """The tool as the chat completions API takes it (tools=[...])."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description or f"{self.kind} tool",
            "parameters": self.args.model_json_schema()}}


def _undo_tool_calls(ctx):
    # A marker: an agent step's compensation is its tool calls' compensations, newest
    # first, each checkpointed; the executor runs them (runs.agents.agent_loop), never this.
    raise RuntimeError("an agent step's compensation runs through runs.agents.agent_loop")


@dataclass
class AgentSpec(StepDef):
    """A step in which a model chooses its tools for several turns (see ToolSpec)."""

    model: str = ""
    system_prompt: str = ""
    budget: AgentBudget = field(default_factory=AgentBudget)
    # Tool calls whose arguments fail their schema that are returned to the model as an
    # error before the run stops for a person.
    schema_error_budget: int = 2
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    # (ctx) -> str: the task, as the first user message. Unset: the run's input as JSON.
    prompt_fn: Callable | None = None
    # The most a model turn is sent, in estimated tokens (0: no bound). Past it, the turns
    # before the last `keep_turns` are summarised by a model call that is itself a stored
    # turn; the model is then sent the summary instead of them (runs.agents.agent_history).
    context_budget: int = 0
    keep_turns: int = 2
    # The model endpoint as a remote system, for its rate limit (runs.machine.limits).
    model_system: str = ""

    def tool(self, name: str, *, args: type[BaseModel], kind: str = READ, impact: str = LOW,
             honours_key: bool = False, redact: tuple[str, ...] = (),
             sensitive: tuple[str, ...] = (), retry: RetryPolicy = DEFAULT_POLICY,
             lookup_delay: float = 10.0, lookup_attempts: int = 3,
             approve_if: Callable | None = None, approval: ApprovalPolicy | None = None,
             system: str = "",
             honours_keys: bool | None = None) -> Callable[[Callable], ToolSpec]:
        """Declare a tool the model may call; the decorated function performs one call. A
        call waits for a person's approval of its arguments if `approve_if(args)` says so
        (unset: every call of a high-impact write or notify tool); `approval` (or the
        agent's) says who is asked. `honours_key`, as for a step: the receiver performs a
        key it has seen once. (`honours_keys` is its former spelling, still taken.)
        `redact` names fields of `args`, `sensitive` fields of its result alone (ToolSpec)."""
        if honours_keys is not None:
            if honours_key and not honours_keys:
                raise validation.DefinitionError(
                    f"tool {name!r} of {self.name!r}: honours_key=True and honours_keys=False; "
                    "give honours_key alone")
            warnings.warn(f"tool {name!r} of {self.name!r}: honours_keys= is now spelt "
                          "honours_key=, as for a step", DeprecationWarning, stacklevel=2)
            honours_key = honours_keys

        def decorator(fn: Callable) -> ToolSpec:
            tool = ToolSpec(agent=self, name=name, kind=kind, fn=fn, args=args,
                            impact=impact, honours_key=honours_key, redact=redact,
                            sensitive=sensitive,
                            retry=retry, lookup_delay=lookup_delay,
                            lookup_attempts=lookup_attempts, approve_if=approve_if,
                            approval=approval,
                            description=" ".join((fn.__doc__ or "").split()), system=system)
            validation.check_unique_tool(tool)
            self.tools[name] = tool
            if impact == HIGH and kind in (WRITE, NOTIFY):
                # The step carries the impact of its strongest tool: its effects are not
                # undone, nor the run ended after them, without a person.
                self.impact = HIGH
            return tool

        return decorator

    def prompt(self, fn: Callable) -> Callable:
        """Declare the task the model is given, built from the input and earlier results."""
        validation.check_step_function(self, fn, role="prompt function", declared=self.prompt_fn)
        self.prompt_fn = fn
        return fn

    def openai_tools(self) -> list[dict]:
        return [tool.openai_tool() for tool in self.tools.values()]


def step_of(workflow: Workflow | None, name: str) -> StepDef | None:
    """Step `name` of `workflow`; None when the workflow is not registered or has no such
    step (a release renamed or removed it without a new version): pages and rules that read
    a run's rows ask this, and the claim holds such a run for a person. By name, not by a
    search of the list (step_index)."""
    if workflow is None:
        return None
    return find_step(workflow, name)


def _as_sent(error: dict) -> dict:
    """A schema error of strict_input as its sender reads it: the JSON reader's own faults
    are about the text strict_input wrote, which nobody sent (its line and column mean
    nothing to them), so one nested too deeply is named so. Text that is not Unicode, which
    the reader refuses as well, is named where it is by the doors before they ask
    (storable.unstorable_texts)."""
    if error["type"] == "json_invalid" and "recursion limit" in error["msg"]:
        return {"loc": [], "msg": "objects and lists nested too deeply to be read",
                "type": "too_deep"}
    return {"loc": list(error["loc"]), "msg": error["msg"], "type": error["type"]}
