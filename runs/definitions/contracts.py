"""Recovery contracts: what each step does to the world and how it is recovered, and the
verdict for a whole workflow, derived from the declarations alone (never hand-written).

The console shows the same table on a workflow's page; `manage.py recovery_contract` prints it.
"""

import re
from dataclasses import dataclass
from datetime import timedelta

from ..duration_text import duration_text
from . import definition

RETRY_IS_SAFE = "retry is safe"
NEEDS_COMPENSATION = "needs compensation"
NEEDS_PERSON = "needs a person's confirmation"

GO, LIMITED_TRIAL, STOP = "go", "limited trial", "stop"


@dataclass(frozen=True)
class StepContract:
    step: str
    kind: str
    impact: str
    side_effect: str
    safe_to_rerun: str
    rule: str
    evidence: str
    owner: str
    stop_condition: str
    classification: str


@dataclass(frozen=True)
class Verdict:
    decision: str  # go, limited trial or stop
    reason: str
    next_action: str


def _settles_unknown(step: definition.StepDef) -> bool:
    return step.reconcile_fn is not None or step.honours_key


def _unknown_stops(step: definition.StepDef) -> bool:
    # Nothing looks its effect up, and it is not sent again on its own after an unknown
    # outcome (high impact, or a receiver that ignores keys): a person decides.
    return step.reconcile_fn is None and (step.impact == definition.HIGH or not step.honours_key)


def step_contract(step: definition.StepDef) -> StepContract:
    """The recovery contract of one step, as its declaration implies it."""
    if step.kind == definition.READ:
        side_effect, rerun = "none (reads)", "yes"
    elif step.kind == definition.DECISION:
        side_effect = "none (asks a model)"
        rerun = "yes: the accepted decision is stored and reused"
    elif step.kind == definition.APPROVAL:
        side_effect, rerun = "waits for a person", "yes: the request is durable"
        if step.approve_if is not None:
            # Asked when the run first reaches the step (transitions.approval_rules).
            side_effect = ("waits for a person, unless its approve_if says none is needed "
                           "(approved by the workflow's rule, nobody asked)")
    elif step.kind == definition.SLEEP:
        side_effect, rerun = "none (waits for its time)", "yes: the timer is durable"
    elif step.kind == definition.EVENT:
        side_effect = "none (waits for an event)"
        rerun = "yes: the wait is durable; a redelivered event changes nothing"
    elif step.kind == definition.AGENT:
        side_effect, rerun = _agent_effect(step)
    else:
        side_effect = "yes: " + ("sends a message" if step.kind == definition.NOTIFY
                                 else "changes another system")
        if step.honours_key and step.reconcile_fn:
            rerun = "yes: same key, receiver deduplicates; lookup by key"
        elif step.honours_key:
            rerun = "yes: same key, receiver deduplicates"
        elif step.reconcile_fn:
            rerun = "only after a lookup by key finds nothing"
        else:
            rerun = "no: nothing can tell whether it happened"

    if step.kind == definition.APPROVAL or step.impact == definition.HIGH:
        classification = NEEDS_PERSON
    elif step.has_side_effect and not _settles_unknown(step):
        classification = NEEDS_PERSON
    elif step.has_side_effect and step.compensate_fn is not None:
        classification = NEEDS_COMPENSATION
    else:
        classification = RETRY_IS_SAFE

    return StepContract(
        step=step.name, kind=step.kind, impact=step.impact, side_effect=side_effect,
        safe_to_rerun=rerun, rule=step.contract.rule or "-",
        evidence=step.contract.evidence or "-", owner=step.contract.owner or "-",
        stop_condition=stop_condition(step),
        classification=classification,
    )


def _agent_effect(agent: definition.AgentSpec) -> tuple[str, str]:
    """An agent's side effect and re-run safety are those of its tools: its turns are stored
    and reused, and each tool call is an effect of its own, settled by its tool's rules."""
    effects = [t for t in agent.tools.values() if t.has_side_effect]
    if not effects:
        return "none (its tools read)", "yes: its turns are stored and reused"
    blind = _unsettleable_tools(agent)
    rerun = (f"no: nothing can tell whether a call of {', '.join(blind)} happened" if blind
             else "yes: its turns are stored and reused; each tool call has its own key, "
                  "sent or looked up")
    return f"yes: through its tools ({', '.join(t.name for t in effects)})", rerun


def _unsettleable_tools(agent: definition.AgentSpec) -> list[str]:
    # The names of an agent's tools whose unknown outcome nothing can settle.
    return [t.name for t in agent.tools.values()
            if t.has_side_effect and not _settles_unknown(t)]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def stop_condition(step: definition.StepDef) -> str:
    """When the runtime stops this step for a person, derived from the rules it applies
    (never typed by hand, so it cannot disagree with what the runtime does)."""
    budget = (f"{_plural(step.retry.maximum_attempts, 'attempt')} or "
              f"{step.retry.maximum_elapsed:g} s spent")
    if step.kind == definition.APPROVAL:
        policy = step.approval
        stop = f"no decision within {duration_text(policy.timeout)}: {policy.on_timeout}"
        # A rule that cannot be read (it raises, its snapshot cannot be made) asks a person.
        return stop if step.approve_if is None else \
            f"when its approve_if asks for a person, or cannot be read: {stop}"
    if step.kind == definition.SLEEP:
        return "none: it wakes at its time, or when an operator wakes it early"
    if step.kind == definition.EVENT:
        if step.timeout is None:
            return "none: it waits until the event comes, or a person delivers or skips it"
        return f"no event within {duration_text(step.timeout)}: {step.on_timeout}"
    if step.kind == definition.AGENT:
        return agent_stop_condition(step, budget)
    if step.kind == definition.READ:
        return f"a permanent error, or {budget}"
    if step.kind == definition.DECISION:
        return (f"a permanent error, {budget}, or output failing its schema "
                f"{step.format_failure_budget + 1} times")
    stops = ["a permanent error",
             f"{budget} (retries and resends after an unknown outcome count alike)"]
    if _unknown_stops(step):
        stops.append("any unknown outcome (nothing can look it up)")
    else:
        if step.reconcile_fn is not None:
            stops.append(f"{_plural(step.lookup_attempts, 'failed lookup')} by key")
            stops.append("a lookup that cannot tell")
        if step.impact == definition.HIGH:
            stops.append("an unknown outcome a lookup does not find (a person decides "
                         "whether to send again; one that is found settles by itself)")
    if step.compensate_fn is not None and step.impact == definition.HIGH:
        stops.append("its undo, which waits for a person to confirm")
    return "; ".join(stops)


def agent_stop_condition(agent: definition.AgentSpec, budget: str) -> str:
    """When an agent step stops for a person: its own limits, and each tool call's, which
    stops as a step of the tool's kind would."""
    limits = agent.budget
    stops = ["a permanent error", f"{budget} on the model's calls",
             f"its budget spent ({_plural(limits.max_turns, 'turn')}, "
             f"{_plural(limits.max_tool_calls, 'tool call')} or "
             f"{_plural(limits.max_tokens, 'token')})",
             "a call of a tool it does not declare",
             f"more than {_plural(agent.schema_error_budget, 'schema error')} (tool "
             "arguments failing their schema, turns asking for too many calls)"]
    blind = _unsettleable_tools(agent)
    if blind:
        stops.append(f"any unknown outcome of a call of {', '.join(blind)} (nothing can look "
                     "it up)")
    if agent.tools:
        stops.append("a tool call's own stop, as a step of its kind and impact stops")
    return "; ".join(stops)


def workflow_verdict(workflow: definition.Workflow) -> Verdict:
    """Go, limited trial or stop, with the reason and the smallest next action."""
    for step in workflow.steps:
        if step.has_side_effect and not _settles_unknown(step):
            return Verdict(
                STOP,
                f"{step.name} has no reconcile function and its receiver ignores keys: after a "
                "timeout nothing can tell whether it happened",
                f"add a reconcile function to {step.name} that looks the effect up by "
                f"{step.contract.evidence or 'its key'}, or send the key to a receiver that "
                "deduplicates on it",
            )
    for step in workflow.steps:
        for tool in getattr(step, "tools", {}).values():
            # An agent's tool that nothing can settle stops the workflow as a step does.
            stop = effect_verdict(tool)
            if stop is not None:
                return Verdict(STOP, f"tool {step.name}/{stop.reason}", stop.next_action)
    for step in workflow.steps:
        # An agent changes the world through its tools: someone owns what they do too.
        changes = step.has_side_effect or any(
            t.has_side_effect for t in getattr(step, "tools", {}).values())
        if changes and not step.contract.owner:
            return Verdict(STOP, f"{step.name} has no owner to decide when it goes wrong",
                           f"name an owner in the recovery contract of {step.name}")
    # An approval step is a person's decision by design, not a recovery that needs one.
    people = [s for s in workflow.steps if s.kind != definition.APPROVAL
              and step_contract(s).classification == NEEDS_PERSON]
    if people:
        names = ", ".join(s.name for s in people)
        owners = ", ".join(sorted({s.contract.owner or "an owner" for s in people}))
        return Verdict(
            LIMITED_TRIAL,
            f"{names} {'needs' if len(people) == 1 else 'need'} a person's confirmation after "
            "an unknown outcome or before undoing",
            f"run a limited trial with {owners} watching the attention list",
        )
    return Verdict(GO, "every step can be retried or compensated by the runtime alone",
                   "none")


def rules_without_function(workflow: definition.Workflow) -> list[str]:
    """The declared rules a step gives the runtime nothing to follow, one line each: a rule
    that names a lookup (reconcile) on a write whose unknown outcome nothing settles (no
    reconcile function, and no resend with its key on its own: high impact, or a receiver
    that ignores keys), or an undo (compensate) on one with no compensation. The rule is the
    author's words, the rest of the contract is derived from the functions: where they
    disagree, the words are wrong. A rule that names one only to deny it ("never
    compensated") claims nothing (rule_claims)."""
    lines = []
    for step in (s for s in workflow.steps if s.has_side_effect):
        rule = step.contract.rule
        if rule_claims(rule, "reconcil") and _unknown_stops(step):
            lines.append(f"{step.name}: its rule says {step.contract.rule!r}, but it declares "
                         "no reconcile function, so nothing looks its effect up by key after "
                         "an unknown outcome and a person decides: add one that finds it by "
                         "ctx.key, or correct the rule")
        if rule_claims(rule, "compensat") and step.compensate_fn is None:
            lines.append(f"{step.name}: its rule says {step.contract.rule!r}, but it declares "
                         "no compensation, so nothing undoes it: add one, or correct the rule")
    return lines


# A word that denies what follows it within a few words of its clause ("never compensated",
# "not to be compensated", "without compensation", "can't be reconciled").
_DENIALS = frozenset({"never", "no", "not", "without", "nor", "neither", "cannot", "nothing",
                      "none"})
_DENIAL_REACH = 3
# Where a clause ends: a denial in one says nothing of the next ("no retry; compensated").
_CLAUSE_END = re.compile(r"[;,.:!?()\[\]]|\bbut\b")


def rule_claims(rule: str, stem: str) -> bool:
    """Whether the rule `rule` claims what the word stem `stem` names: a word containing
    it that no denial (_DENIALS, or a word ending in n't) stands before within _DENIAL_REACH
    words of the same clause."""
    for clause in _CLAUSE_END.split(rule.lower()):
        words = re.findall(r"[a-z']+", clause)
        for at, word in enumerate(words):
            before = words[max(0, at - _DENIAL_REACH):at]
            if stem in word and not any(w in _DENIALS or w.endswith("n't") for w in before):
                return True
    return False


def contract_table(workflow: definition.Workflow) -> list[StepContract]:
    """The recovery contract of every step, in order."""
    return [step_contract(s) for s in workflow.steps]


# Who is asked before each effect of a step with the stop verdict when the step names no
# approvers: its owner's group, within a working day, else the run goes to attention.
STOP_GATE_TIMEOUT = timedelta(days=1)


def effect_verdict(spec: "definition.StepDef | definition.ToolSpec") -> Verdict | None:
    """The verdict of one step or agent tool, when it alone forces it: `stop` for a
    high-impact effect that nothing can settle after an unknown outcome (no lookup by key, a
    receiver that ignores keys). Such an effect never runs unattended: before each of its
    attempts the run waits for a person (runs.machine.transitions.stop_gate for a step, the
    tool-call approval for a tool). None: it needs no person before it runs (a low-impact one stops
    after an unknown outcome instead)."""
    if not spec.has_side_effect or spec.impact != definition.HIGH or _settles_unknown(spec):
        return None
    return Verdict(
        STOP,
        f"{spec.name} has no reconcile function and its receiver ignores keys: after a "
        "timeout nothing can tell whether it happened, so a person approves each attempt",
        f"add a reconcile function to {spec.name}, or send the key to a receiver that "
        "deduplicates on it",
    )


def stop_gate_policy(step: definition.StepDef) -> definition.ApprovalPolicy:
    """Who approves each attempt of a step with the stop verdict: the approvers it declares,
    else the group of its contract's owner."""
    if step.approval is not None:
        return step.approval
    owner = step.contract.owner or "operators"
    return definition.ApprovalPolicy(approvers=(f"group:{owner}",), remind_every=timedelta(hours=4),
                            timeout=STOP_GATE_TIMEOUT, on_timeout="cancel")
