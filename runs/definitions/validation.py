"""What a definition may declare, checked when it is declared. A mistake in a workflow's
definition fails the import of its module with an error naming the workflow, the step and
what is wrong, instead of failing in a worker when a run reaches the step, or never: a step
name the database cannot hold, a function the executor cannot call, a schema that is not a
schema. Workflow, StepDef, an agent's ToolSpec and the registry call these; each rule is
written here once (a sleep's and an event wait's in runs.definitions.wait_checks, who approves
in runs.definitions.approval_checks)."""

import inspect
import math
import re
import unicodedata
from datetime import timedelta

from pydantic import BaseModel, PydanticUserError

from . import step_index
from .retry import RetryPolicy
from .sensitive_fields import unknown_fields_problem

# The columns that hold a workflow's name (Run.workflow_name) and a step's (Step.name).
NAME_MAX = 200
# Versions are stored in PositiveIntegerField columns (Run.workflow_version, Step.version):
# a 4-byte integer on PostgreSQL.
VERSION_MAX = 2**31 - 1
# A step's name is part of its idempotency key (workflow:business key:step:vN) and of its
# compensation's (...:step:compensate:vN): a ':' in it would let one step's key be another's
# (a step "charge:compensate" sends the undo key of "charge"). A '/' separates an agent step
# from its tool ("triage/post-ledger") and a step's artifact from the run's folder.
STEP_NAME_FORBIDDEN = ":/"


class DefinitionError(ValueError):
    """A workflow's definition declares something the runtime cannot run."""


NO_STEP = object()


def where(workflow, step=NO_STEP) -> str:
    """`workflow invoice-approval v1, step 'classify'`: the start of every refusal. A name or
    version that is itself the mistake is quoted as it was given."""
    name, version = getattr(workflow, "name", workflow), getattr(workflow, "version", None)
    place = f"workflow {name!r}" if name_problem(name) else f"workflow {name}"
    if version_problem(version) is None:
        place += f" v{version}"
    return place if step is NO_STEP else f"{place}, step {step!r}"


def name_problem(name) -> str | None:
    """Why `name` cannot name a workflow or a step, or None. It is stored in a column, shown
    in one-line displays (a mail subject, a log line), where a control character would forge
    a line, and compared as it is, where spaces around it would make two names of one."""
    if not isinstance(name, str):
        return f"its name must be text, not {type(name).__name__}"
    if not name.strip():
        return "its name is empty"
    if name != name.strip():
        return "its name starts or ends with spaces"
    if len(name) > NAME_MAX:
        return f"its name is {len(name)} characters long, at most {NAME_MAX}"
    for c in name:
        if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            return f"its name holds the control character U+{ord(c):04X}"
    return None


def version_problem(version) -> str | None:
    # bool is an int to Python: version=True would be stored as 1.
    if not isinstance(version, int) or isinstance(version, bool):
        return f"its version must be a whole number, not {type(version).__name__}"
    if not 1 <= version <= VERSION_MAX:
        return f"its version must be from 1 to {VERSION_MAX}, not {version}"
    return None


def is_model(schema) -> bool:
    return isinstance(schema, type) and issubclass(schema, BaseModel)


def json_schema_problem(schema: type[BaseModel], *, what: str, sent: str) -> str | None:
    """Why `schema` (`what`: "its input") has no JSON Schema, which `sent` says who is given,
    or None. A field pydantic cannot describe (a Callable, an arbitrary class) or a forward
    reference left unresolved failed only where the schema is published: the API's whole
    OpenAPI document answered 500, an agent's every model turn failed."""
    try:
        schema.model_json_schema()
    except PydanticUserError as exc:
        return f"{what} has no JSON Schema, which {sent}: {str(exc).splitlines()[0]}"
    return None


def check_workflow(workflow) -> None:
    """Refuse a workflow's own declaration: its name, version and input schema."""
    problem = name_problem(workflow.name) or version_problem(workflow.version)
    if problem is None and ":" in workflow.name:
        # The idempotency keys join workflow, business key and step with ':' (runs.machine
        # .keys): workflow "a:b" with the business key "c" would send the keys of workflow
        # "a" with the key "b:c", and a receiver would take two actions for one.
        problem = ("its name holds ':', which separates it from the business key in the "
                   "idempotency keys (workflow 'a:b' with key 'c' would send the keys of "
                   "workflow 'a' with key 'b:c')")
    if problem is None and not is_model(workflow.input_schema):
        problem = (f"its input must be a pydantic model class, not "
                   f"{workflow.input_schema!r}")
    if problem is None:
        problem = json_schema_problem(workflow.input_schema, what="its input",
                                      sent="the API publishes and starts are checked against")
    if problem is not None:
        raise DefinitionError(f"{where(workflow)}: {problem}")


def check_workflow_options(workflow) -> None:
    """Refuse what a workflow declares beside its steps, before it is registered: `services`
    (a client given for its factory failed at the first claim), `retention_days`, and the
    example inputs the drill kit starts runs with."""
    services, days = workflow.services_factory, workflow.retention_days
    checks = (
        (services is None or callable(services),
         f"services must be a function building the clients, not {type(services).__name__}"),
        (isinstance(workflow.auto_compensate, bool),
         f"auto_compensate must be True or False, not {workflow.auto_compensate!r}"),
        (days is None or whole(days, least=0),
         f"retention_days must be a whole number of days, 0 or more, not {days!r}"),
        *(example_check(workflow, option) for option in ("example", "approval_example")),
    )
    refuse(where(workflow), next((why for ok, why in checks if not ok), None))


def example_check(workflow, option: str) -> tuple[bool, str]:
    example = getattr(workflow, option)
    if example is None or not isinstance(example, dict):
        return example is None, f"{option} must be a dict of its input, not {example!r}"
    errors = workflow.parse_input(example, to_its_sender=True)[1]
    return not errors, f"{option} is no valid input: " + "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in errors)


def check_declares_steps(workflow) -> None:
    """Refuse a workflow that declares no step once its module is imported (its steps are
    declared after it, so not before): each of its runs would be completed at once, having
    done nothing, and reported as a success."""
    if not workflow.steps:
        raise DefinitionError(f"{where(workflow)}: declares no steps; each of its runs would "
                              "complete at once having done nothing")


def function_problem(fn, *, takes: str = "(ctx)", arguments: int = 1) -> str | None:
    """Why the executor cannot call `fn` with `arguments` positional arguments and use what it
    returns, or None. A coroutine or a generator would be returned unrun and stored as a
    result (or refused as one) at every attempt; a wrong signature fails only when a run
    reaches the step."""
    if not callable(fn):
        return f"its function must be callable, not {type(fn).__name__}"
    # A callable object's kind is that of its __call__; a partial is unwrapped by inspect.
    targets = (fn,) if inspect.isroutine(fn) else (fn, type(fn).__call__)
    if any(inspect.iscoroutinefunction(t) or inspect.isasyncgenfunction(t) for t in targets):
        return "its function is async: the worker calls it and does not await it; declare a " \
               "plain def (run the coroutine inside it if need be)"
    if any(inspect.isgeneratorfunction(t) for t in targets):
        return "its function is a generator: it would return a generator, not a result"
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin whose signature Python cannot tell
        return None
    try:
        signature.bind(*([None] * arguments))
    except TypeError:
        return f"its function {signature} cannot be called as {takes}"
    return None


def role_problem(fn, *, role: str = "function", takes: str = "(ctx)",
                 arguments: int = 1) -> str | None:
    """function_problem, saying which of a step's or a tool's functions `fn` is."""
    problem = function_problem(fn, takes=takes, arguments=arguments)
    if problem is not None and role != "function":
        problem = problem.replace("its function", f"its {role}", 1)
    return problem


def check_function(step, fn, *, role: str = "function", takes: str = "(ctx)",
                   arguments: int = 1) -> None:
    problem = role_problem(fn, role=role, takes=takes, arguments=arguments)
    if problem is not None:
        raise DefinitionError(f"{where(step.workflow, step.name)}: {problem}")


def check_step_function(step, fn, *, role: str, declared) -> None:
    """A function a step declares beside its own (reconcile, compensate, describe, a preview,
    an agent's prompt): callable as (ctx), and declared once (`declared`: the first, or
    None)."""
    check_function(step, fn, role=role)
    check_declared_once(where(step.workflow, step.name), role=role, declared=declared, fn=fn)


def check_declared_once(place: str, *, role: str, declared, fn, owner: str = "step") -> None:
    """Refuse a second reconcile or compensate function for one step or tool (`declared` is
    the first, or None). Assigning it would replace the first without a word: a copy left
    by an edit, or a function meant for the step next to it, would look the effect up or
    undo it unreviewed, and the module shows two declarations where the runtime keeps one."""
    if declared is not None:
        raise DefinitionError(f"{place}: its {role} is declared twice ({named(declared)}, "
                              f"then {named(fn)}); a {owner} has one")


def named(fn) -> str:
    return getattr(fn, "__name__", None) or repr(fn)


def step_problem(step, *, impacts: tuple[str, ...], contract: type) -> str | None:
    """Why `step` cannot be declared as it is, or None (its function is checked apart).
    `impacts` and `contract` are what runs.definitions.declarations defines them to be."""
    name = step.name
    problem = name_problem(name)
    if problem is None and any(c in name for c in STEP_NAME_FORBIDDEN):
        problem = f"its name may not hold ':' or '/' (use '-' or '.'), not {name!r}"
    if problem is not None:
        return problem
    version = version_problem(step.version)
    # An approval step's rule, called as approve_if(snapshot) by the worker reaching it.
    rule = None if step.approve_if is None else role_problem(
        step.approve_if, role="approve_if", takes="(snapshot)")
    checks = (
        (version is None, version),
        (not rule, rule),
        (step.impact in impacts, f"impact must be one of {', '.join(impacts)}, "
                                 f"not {step.impact!r}"),
        *effect_checks(step),
        (isinstance(step.contract, contract),
         f"contract must be a Contract, not {type(step.contract).__name__}"),
        (step.schema is None or is_model(step.schema),
         f"its schema must be a pydantic model class, not {step.schema!r}"),
        (whole(step.format_failure_budget, least=0),
         f"format_failure_budget must be a whole number >= 0, not {step.format_failure_budget!r}"),
        label_check("system", step.system),
        input_function_check("until", step.sleep_until),
        input_function_check("correlate", step.correlate),
        fields_check("sensitive", step.sensitive),
    )
    problem = next((why for ok, why in checks if not ok), None)
    # A step with a schema (a decision, an event wait) stores what its schema took.
    return problem or unknown_fields_problem("sensitive", step.sensitive, step.schema,
                                             held="its result")


def effect_checks(effect) -> tuple:
    """(ok, why) for the options a step and an agent's tool share (one effect machine runs
    both), with their retry policy's own mistakes: built before its step, it is named here."""
    problem = effect.retry.problem if isinstance(effect.retry, RetryPolicy) else None
    return (
        (isinstance(effect.retry, RetryPolicy),
         f"retry must be a RetryPolicy, not {type(effect.retry).__name__}"),
        (problem is None, f"retry policy: {problem}"),
        # Read as a yes or a no: "no" given for it is true, and a receiver that ignores keys
        # would be sent the effect again after an unknown outcome.
        (isinstance(effect.honours_key, bool),
         f"honours_key must be True or False, not {effect.honours_key!r}"),
        (whole(effect.lookup_attempts, least=1),
         f"lookup_attempts must be a whole number >= 1, not {effect.lookup_attempts!r}"),
        (seconds(effect.lookup_delay),
         f"lookup_delay must be a finite number of seconds >= 0, not {effect.lookup_delay!r}"),
    )


def input_function_check(option: str, fn) -> tuple[bool, str]:
    """(ok, why) for a function of the run's input that a wait declares (a sleep's `until`,
    an event wait's `correlate`), called as fn(input) with the input as stored, a dict, when
    a run is started and again when it reaches the wait. A datetime given in its place, or a
    function of no argument, was accepted here and held every run for a person at that
    step."""
    if fn is None:
        return True, ""
    if not callable(fn):
        return False, f"{option} must be a function of the run's input, not {fn!r}"
    problem = role_problem(fn, role=f"{option} function", takes=f"{option}(input)")
    return problem is None, problem or ""


def fields_check(option: str, value) -> tuple[bool, str]:
    return (not isinstance(value, str),
            f"{option} names fields: write {option}=({value!r},), not a string, whose "
            "letters would be taken for field names")


def label_check(option: str, value) -> tuple[bool, str]:
    """(ok, why) for a name a step declares for the system it calls (a step's and a tool's
    `system`, an agent's `model_system`) or the model it asks (`model`); "" declares none.
    A rate limit, a dispatch pause and the model endpoint find it by its text as it is: a
    tuple, or "ledger " with a blank, was declared and matched no limit and no pause."""
    if not isinstance(value, str):
        return False, f"{option} must be text, not {value!r}"
    if value and not value.strip():
        return False, f"{option} is blank ({value!r}): name it, or leave it unset"
    return value == value.strip(), (f"{option} {value!r} starts or ends with blanks, so "
                                     f"nothing named {value.strip()!r} would match it")


# The model calls a tool by its name, which the chat completions API holds to this.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def tool_where(tool) -> str:
    """`workflow triage v1, step 'triage', tool 'post-ledger'`: the start of a tool's refusals."""
    return f"{where(tool.agent.workflow, tool.agent.name)}, tool {tool.name!r}"


def check_tool(tool, *, kinds: tuple[str, ...], impacts: tuple[str, ...]) -> None:
    """Refuse an agent's tool as it is declared (ToolSpec.__post_init__): its name, kind,
    impact (`kinds`, `impacts`: the declarations') and args schema, its function, called as
    (ctx, args) once the model chooses it, its options, held to a step's rules, and calls
    that may wait for a person with nobody named to ask. Left to run time, a wrong one
    failed only when a model chose the tool."""
    checks = (
        (isinstance(tool.name, str) and TOOL_NAME.fullmatch(tool.name),
         "its name must be 1-64 letters, digits, '_' or '-'"),
        (tool.kind in kinds, f"kind must be one of {', '.join(kinds)}, not {tool.kind!r}"),
        (tool.impact in impacts,
         f"impact must be one of {', '.join(impacts)}, not {tool.impact!r}"),
        (is_model(tool.args), f"args must be a pydantic model class, not {tool.args!r}"),
    )
    problem = next((why for ok, why in checks if not ok), None)
    problem = problem or json_schema_problem(tool.args, what="its args class",
                                             sent="the model is sent to call the tool")
    problem = problem or role_problem(tool.fn, takes="(ctx, args)", arguments=2)
    if problem is None and tool.approve_if is not None:
        problem = role_problem(tool.approve_if, role="approve_if", takes="(args)")
    if problem is None:
        problem = approval_problem(tool.approval)
    if problem is None:
        checks = (*effect_checks(tool), label_check("system", tool.system),
                  fields_check("redact", tool.redact),
                  fields_check("sensitive", tool.sensitive),
                  (not tool.may_need_approval or tool.approval_policy is not None,
                   "its calls may wait for a person's approval; declare who approves them "
                   "(approval=tool_approval(...) on the tool or on the agent)"))
        problem = next((why for ok, why in checks if not ok), None)
    problem = problem or unknown_fields_problem(
        "redact", tool.redact, tool.args, held="its args",
        hint="; a field of its result alone is declared sensitive=(...)")
    refuse(tool_where(tool), problem)


def check_unique_tool(tool) -> None:
    """Refuse a tool whose name its agent declared already, as it is added to the agent."""
    refuse(tool_where(tool), "declared twice (tool names are unique within an agent)"
           if tool.name in tool.agent.tools else None)


def check_changes_something(owner, verb: str) -> None:
    """Refuse a reconcile, compensate or compensation preview (`verb`) declared on a step or
    a tool (`owner`) that changes nothing: the runtime would never call it, and the module
    would say an effect is looked up or undone where there is none."""
    if owner.has_side_effect:
        return
    tool = getattr(owner, "agent", None) is not None
    noun = "tool" if tool else "step"
    refuse(tool_where(owner) if tool else where(owner.workflow, owner.name),
           f"only write and notify {noun}s {verb}; its kind is {owner.kind}")


def check_tool_function(tool, fn, purpose: str) -> None:
    """Refuse a tool's "reconcile" or "compensate" function (`purpose`): one called as
    (ctx, args), declared once."""
    role = f"{purpose} function"
    refuse(tool_where(tool), role_problem(fn, role=role, takes="(ctx, args)", arguments=2))
    check_declared_once(tool_where(tool), role=role, declared=getattr(tool, f"{purpose}_fn"),
                        fn=fn, owner="tool")


# What the agent loop reads of an agent's budget (runs.definitions.declarations.AgentBudget).
BUDGET_LIMITS = ("max_turns", "max_tool_calls", "max_tokens")


def budget_problem(budget) -> str | None:
    """Why an agent's `budget` is not one the agent loop can keep, or None (max_calls_per_turn
    may be None: the installation's bound). A dict of the same limits, or a limit of 2.5
    turns, passed the declaration and failed (or was compared as it was) at model turns."""
    if not all(hasattr(budget, limit) for limit in BUDGET_LIMITS):
        return (f"budget must be an AgentBudget (budget=AgentBudget(max_turns=...)), not "
                f"{type(budget).__name__}")
    for limit in (*BUDGET_LIMITS, "max_calls_per_turn"):
        value = getattr(budget, limit, None)
        if (value is not None or limit in BUDGET_LIMITS) and not whole(value, least=1):
            return f"its budget's {limit} must be a whole number >= 1, not {value!r}"
    return None


def approval_problem(approval) -> str | None:
    """Why an agent's or a tool's `approval` is not who approves its calls, or None. Approvers
    given as a tuple passed the declaration and failed when a call first waited for a person.
    Read by what the approvals app reads of it (runs.definitions.declarations.ApprovalPolicy,
    which imports this module)."""
    if approval is None or (isinstance(getattr(approval, "approvers", None), tuple)
                            and isinstance(getattr(approval, "timeout", None), timedelta)):
        return None
    return (f"approval must be tool_approval(approvers=...), not "
            f"{type(approval).__name__}")


def check_agent(spec) -> None:
    """Refuse an agent step whose system prompt says nothing (the model would be sent an
    empty instruction at every turn, and choose its tools with no rule for them), whose
    budget or approval is not one (budget_problem, approval_problem), whose model or
    model_system is no name (label_check), or whose schema_error_budget, context_budget or
    keep_turns is no whole number >= 0."""
    prompt = spec.system_prompt
    problem = None
    if not isinstance(prompt, str):
        problem = f"its system prompt must be text, not {type(prompt).__name__}"
    elif not prompt.strip():
        problem = "its system prompt is empty: the model would be given no instructions"
    else:
        labels = (label_check("model", spec.model), label_check("model_system", spec.model_system))
        problem = (budget_problem(spec.budget) or approval_problem(spec.approval)
                   or next((why for ok, why in labels if not ok), None))
    for option in () if problem else ("schema_error_budget", "context_budget", "keep_turns"):
        if not whole(getattr(spec, option), least=0):
            problem = f"{option} must be a whole number >= 0, not {getattr(spec, option)!r}"
            break
    if problem is not None:
        raise DefinitionError(f"{where(spec.workflow, spec.name)}: {problem}")


def check_named(workflow, kind: str, name) -> None:
    """Refuse a step decorator used without its call (`@wf.read` for `@wf.read("name")`):
    the function would be taken for the name, and the decorator left in its place would
    declare no step at all, silently."""
    if callable(name):
        fn = getattr(name, "__name__", "the function")
        raise DefinitionError(f"{where(workflow)}: {fn} is declared with @{kind} and no step "
                              f"name: write @<workflow>.{kind}(\"name\", ...)")


def check_unique_name(workflow, step) -> None:
    """Refuse a step whose name the workflow declared already, as it is added to the
    workflow (a StepDef built apart, as dataclasses.replace does, is no second declaration)."""
    if step_index.declared(workflow, step.name):
        raise DefinitionError(f"{where(workflow, step.name)}: declared twice (step names are "
                              "unique within a workflow)")


def refuse(place: str, problem: str | None) -> None:
    if problem is not None:
        raise DefinitionError(f"{place}: {problem}")


def limits_problem(versions: list, *, max_in_flight, concurrency_key: str, per_key,
                   priority) -> str | None:
    """Why a workflow's limits (runs.machine.limits.limit_workflow) are none the claim can
    keep, or None. `versions`: the workflow's versions known (their inputs are where the
    concurrency key is looked for; none known, it is not). A key no version's input has
    limited nothing: every run's value was missing alike, and none matched another."""
    if max_in_flight is not None and not whole(max_in_flight, least=1):
        return f"max_in_flight must be a whole number at least 1, not {max_in_flight!r}"
    if not whole(per_key, least=1):
        return f"per_key must be a whole number at least 1, not {per_key!r}"
    if not whole(priority, least=-(2 ** 31)):
        return f"priority must be a whole number, not {priority!r}"
    if concurrency_key:
        fields = sorted({f for version in versions
                         for f in getattr(version.input_schema, "model_fields", {})})
        if versions and concurrency_key not in fields:
            return (f"concurrency_key {concurrency_key!r} is no field of its input "
                    f"(its fields: {', '.join(fields) or 'none'})")
    return None


def whole(value, *, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def seconds(value) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def check_step(step, *, impacts: tuple[str, ...], contract: type) -> None:
    """Refuse a step's declaration (StepDef.__post_init__ calls this for every kind)."""
    problem = step_problem(step, impacts=impacts, contract=contract)
    if problem is None:
        check_function(step, step.fn)
        return
    raise DefinitionError(f"{where(step.workflow, step.name)}: {problem}")
