"""The investigation card: a read-only report on one run, for the person about to act.

Facts come with their evidence (audit record numbers, step rows, remote references, the
result of a lookup by key made now) and are kept apart from inferences, which are marked as
such. It says which effects exist in other systems and which do not, what could not be
confirmed, the duplicate risk of each action the run offers, how each step would be
recovered, and a go / limited / stop verdict with the smallest next step. Nothing here
changes a run: lookups are reads, and they are made only when asked for.
"""

import re
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime

from django.utils import timezone

from audit.actions import AuditAction
from audit.chain import verify_chain
from audit.head_seals import head_seal_problem
from audit.models import AuditRecord

from ..definitions import definition
from ..definitions.contracts import NEEDS_COMPENSATION, NEEDS_PERSON, step_contract
from ..execution.executor import ask_remote
from ..machine.context import context_outside_executor
from ..machine.endings import ended_waits
from ..machine.errors import TransitionNotAllowed
from ..machine.intentions import step_lines
from ..machine.transitions.approval_rules import rule_approval_words
from ..machine.transitions.operator_rules import undo_outcome_unknown
from ..machine.transitions.rerun_rules import standing_effects
from ..models import AttentionReason, Run, Step, StepStatus
from ..permissions import grant_for
from ..reads.step_rows import steps_in_order
from .actions import ACTIONS, offered
from .guidance import for_reader, recommend

GO, LIMITED, STOP = "go", "limited", "stop"
_EFFECT_ACTIONS = (AuditAction.SUCCEEDED, AuditAction.RECONCILED,
                   AuditAction.LATE_RESULT_RECORDED)


@dataclass(frozen=True)
class Fact:
    text: str
    evidence: str


@dataclass(frozen=True)
class StepFinding:
    step: str
    kind: str
    impact: str
    status: str
    does: str  # what it did or will do, in one line
    effect: str  # "exists", "does not exist", "unconfirmed" or "none" (no side effect)
    remote_ref: str
    recovery: str  # retry is safe / needs compensation / needs a person
    # Set when it reads `waiting` though the run's end ended that wait (endings.ended_waits).
    wait_ended: str = ""
    # Set when the workflow's rule approved it: its reference names only who approved.
    approved_unasked: str = ""


@dataclass(frozen=True)
class ActionRisk:
    action: str
    label: str
    duplicate_risk: str


@dataclass
class Investigation:
    run_id: int
    workflow: str
    business_key: str
    status: str
    made_at: datetime
    lookups_made: bool
    facts: list[Fact] = field(default_factory=list)
    inferences: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)
    steps: list[StepFinding] = field(default_factory=list)
    risks: list[ActionRisk] = field(default_factory=list)
    verdict: str = GO
    next_step: str = ""
    # The run's audit hash chain, verified when the card reads the records itself:
    # "intact", "broken" (from `chain_broken_at`), or "" (not verified: the run page's card).
    audit_chain: str = ""
    chain_broken_at: int | None = None

    def as_dict(self) -> dict:
        data = asdict(self)
        data["made_at"] = self.made_at.isoformat()
        return data


def lookups_refusal(user, run: Run) -> str | None:
    """Why `user` may not have the card look effects up in other systems, or None. A lookup
    by key is a read, but it reaches another system: it is a person's, with the permission
    to reconcile on the run's workflow, whoever asks (the console, the API)."""
    permission = ACTIONS["reconcile"].permission
    if user is not None and grant_for(user, permission).covers(run.workflow_id):
        return None
    return f"looking effects up in other systems needs the reconcile permission (runs.{permission})"


def investigate(run: Run, *, reader=None, lookups: bool = False,
                steps: list[Step] | None = None,
                records: list[AuditRecord] | None = None) -> Investigation:
    """The investigation card of `run`, as `reader` (the person it is made for) reads it:
    where they may not take the action it advises, its next step says so and who may
    (guidance.for_reader; a guidance.ActsForNobody, a token that acts for nobody, is told
    the action needs a person); None: nobody in particular, the advice alone. With
    lookups=True, each step whose outcome is unknown is looked up by its key now (a read),
    and what the remote system said becomes a fact. A caller that has the run's steps and
    audit records in order already passes them."""
    if steps is None:
        steps = list(steps_in_order(run=run))
    whole_chain = records is None
    if whole_chain:
        records = list(AuditRecord.objects.filter(run=run).order_by("seq"))
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    card = Investigation(run_id=run.pk, workflow=run.workflow_name,
                         business_key=run.business_key, status=run.status,
                         made_at=timezone.now(), lookups_made=lookups)
    last = records[-1].seq if records else 0
    card.facts.append(Fact(
        f"run is {run.status}" + (f" ({run.get_attention_reason_display()}): "
                                  f"{run.status_message}" if run.attention_reason else ""),
        f"run row; audit #{last}"))
    if whole_chain:
        _check_chain(card, run, records)
    lines = step_lines(run, steps)
    ended = ended_waits(run, steps)
    for step in steps:
        spec = _spec(workflow, step)
        card.steps.append(replace(
            _assess(card, run, step, spec, records, workflow, lookups, lines[step.name]),
            wait_ended=ended.get(step.name, ""), approved_unasked=rule_approval_words(step)))
    _risks(card, run, steps, workflow)
    advised = _verdict(card, run, steps)
    if lookups and card.audit_chain != "broken" and _settled_by_lookup(
            card, ended=run.attention_reason == AttentionReason.ENDED_UNSETTLED):
        advised = ACTIONS["reconcile"]
    if reader is not None:
        card.next_step = for_reader(card.next_step, run, advised, reader)
    return card


def _check_chain(card: Investigation, run: Run, records: list[AuditRecord]) -> None:
    """The evidence below rests on the run's audit records: say whether they are as written,
    and all there (the run row keeps the chain's head: records removed from its end, or all
    of them, leave the rest a chain that verifies)."""
    broken = verify_chain(records)
    last = records[-1] if records else None
    head_seq, head, seal = run.audit_seq, run.audit_head, run.audit_seal
    if broken is None and (last.seq if last else 0) < run.audit_seq:
        missing = (last.seq if last else 0) + 1
        card.audit_chain, card.chain_broken_at = "broken", missing
        card.unconfirmed.append(
            f"everything from audit record #{missing} on: the run's chain ends before the "
            f"head its row keeps (#{run.audit_seq}), so records were removed after they were "
            "written (manage.py verify_audit names the run)")
        return
    if broken is None and last is not None and last.seq > run.audit_seq:
        # Past the head the run row kept when it was read: the run may have gone on since
        # (its head read again, after the records), or records were added outside the
        # runtime, with hashes that link.
        head_seq, head, seal = Run.objects.filter(pk=run.pk).values_list(
            "audit_seq", "audit_head", "audit_seal").get()
        if head_seq < last.seq:
            card.audit_chain, card.chain_broken_at = "broken", head_seq + 1
            card.unconfirmed.append(
                f"everything from audit record #{head_seq + 1} on: the run's chain goes on "
                f"past the head its row keeps (#{head_seq}), so records were added outside "
                "the runtime (manage.py verify_audit names the run)")
            return
        if head_seq == last.seq and last.hash != head:
            broken = last
    elif broken is None and last is not None and last.seq == run.audit_seq \
            and last.hash != run.audit_head:
        broken = last
    unsealed = (head_seal_problem(run.pk, head_seq, head, seal)
                if broken is None and last is not None else None)
    if unsealed is not None:
        # The records link and end at the head, but the runtime did not write that head:
        # the whole chain may have been rewritten with every hash recomputed.
        card.audit_chain, card.chain_broken_at = "broken", 1
        card.unconfirmed.append(
            f"the whole audit history: the records link up to the head the run's row keeps, "
            f"but {unsealed} (manage.py verify_audit names the run)")
        return
    if broken is None:
        card.audit_chain = "intact"
        card.facts.append(Fact(f"the run's audit chain verifies, {len(records)} records",
                               "hash chain and its head's seal checked now"))
        return
    card.audit_chain, card.chain_broken_at = "broken", broken.seq
    card.unconfirmed.append(
        f"everything from audit record #{broken.seq} ({broken.action}) on: the run's audit "
        "chain does not verify there, so its history may have been changed after it was "
        "written (manage.py verify_audit names the record)")


def _settled_by_lookup(card: Investigation, *, ended: bool) -> bool:
    """A step still unknown in its row whose lookup made now found the effect (or proved
    it absent) is reported once, as found: not also as unconfirmed, and the next step says
    to record what the lookup found (reconcile). Whether there was one."""
    settled = {f.step: f for f in card.steps
               if f.status == StepStatus.UNKNOWN and f.effect in ("exists", "does not exist")}
    if not settled:
        return False
    card.unconfirmed = [text for text in card.unconfirmed
                        if not any(text.startswith((f"{name}:", f"whether {name} "))
                                   for name in settled)]
    for index, finding in enumerate(card.steps):
        if finding.step in settled:
            found = [f.text.split("found ", 1)[1] for f in card.facts
                     if f.text.startswith(f"{finding.step} took effect: found ")]
            card.steps[index] = replace(
                finding, status="unknown until recorded",
                remote_ref=finding.remote_ref or (found[-1] if found else ""))
    first = next(f for f in card.steps if f.step in settled)
    found = first.effect == "exists"
    what = (f"found it ({first.remote_ref or 'see the facts'})" if found
            else "found nothing, and the receiver honours keys")
    # What follows the record is the reconcile transition's rule: found, the run goes on;
    # not found, the step is failed and waits for a retry; on a run a person ended, neither
    # sends it on (it is terminated once every effect is settled).
    if ended:
        then = ("it does not send the run on: once every effect is settled the run is "
                "terminated")
    elif found:
        then = "the run continues"
    else:
        then = (f"{first.step} is then failed and the run stays in attention: Retry step "
                "sends it again with the same key")
    card.next_step = (f"Reconcile: {first.step}: the lookup by key just now {what}; "
                      f"reconcile looks it up again and records it as "
                      f"{'done' if found else 'not done'}; {then}.")
    return True


def _spec(workflow: definition.Workflow | None, step: Step) -> definition.StepDef | None:
    return definition.step_of(workflow, step.name)


def _record(records: list[AuditRecord], step: Step, actions) -> str:
    hits = [r.seq for r in records if r.step_name == step.name and r.action in actions]
    return f"audit #{hits[-1]}" if hits else "step row"


def _assess(card: Investigation, run: Run, step: Step, spec: definition.StepDef | None,
            records: list[AuditRecord], workflow: definition.Workflow | None,
            lookups: bool, does: str) -> StepFinding:
    recovery = step_contract(spec).classification if spec is not None else NEEDS_PERSON
    effect = "none"
    side_effect = step.kind in (definition.WRITE, definition.NOTIFY)
    if side_effect:
        if step.status in (StepStatus.SUCCEEDED, StepStatus.COMPENSATING,
                           StepStatus.COMPENSATION_FAILED):
            effect = "exists"
            card.facts.append(Fact(f"{step.name} took effect: {step.remote_ref or 'no ref'}",
                                   _record(records, step, _EFFECT_ACTIONS)))
            if undo_outcome_unknown(step):
                # Never relabelled failed: the undo was sent and not answered, so the
                # effect may already be undone (an undo made by hand could be a second).
                effect = "unconfirmed"
                card.unconfirmed.append(
                    f"whether the undo of {step.name} took effect: its last try's outcome "
                    f"is unknown ({step.error_message or step.error_class}), so it may "
                    "have been undone; check the remote system by its compensation key "
                    f"{step.compensation_key[:12]}… before undoing it by hand")
            elif step.status == StepStatus.COMPENSATION_FAILED:
                card.facts.append(Fact(f"the undo of {step.name} failed: "
                                       f"{step.error_message}",
                                       _record(records, step,
                                               (AuditAction.COMPENSATION_FAILED,))))
        elif step.status == StepStatus.COMPENSATED:
            effect = "does not exist"
            card.facts.append(Fact(f"{step.name} was undone: {step.compensation_ref}",
                                   _record(records, step,
                                           (AuditAction.COMPENSATION_SUCCEEDED,))))
        elif step.status == StepStatus.FAILED:
            effect = "does not exist"
            card.facts.append(Fact(f"{step.name} failed with evidence that nothing changed: "
                                   f"{step.error_message or step.error_class}",
                                   _record(records, step, (AuditAction.FAILED,
                                                           AuditAction.ATTENTION,
                                                           AuditAction.RECONCILED))))
        elif step.status in (StepStatus.PENDING, StepStatus.SKIPPED):
            # The intent checkpoint is the step's row: an attempt counted there was sent.
            if not step.attempt:
                effect = "does not exist"
                card.facts.append(Fact(f"{step.name} was never sent", "no attempt recorded"))
            else:
                ended = [r for r in records if r.step_name == step.name
                         and "started_at" in (r.data or {})]
                seen = f"audit #{ended[-1].seq}" if ended else f"attempt {step.attempt}"
                card.unconfirmed.append(f"{step.name}: sent before ({seen}), "
                                        f"now {step.status}")
        elif step.status in (StepStatus.UNKNOWN, StepStatus.RUNNING, StepStatus.SCHEDULED):
            effect = _unknown_effect(card, run, step, spec, workflow, lookups)
    if spec is not None and side_effect and spec.honours_key and effect == "unconfirmed":
        card.inferences.append(f"{step.name}: the receiver honours keys, so sending it again "
                               "with the same key would not duplicate it (from the "
                               "declaration, not observed)")
    return StepFinding(step=step.name, kind=step.kind, impact=step.impact, status=step.status,
                       does=does, effect=effect, remote_ref=step.remote_ref, recovery=recovery)


def _unknown_effect(card: Investigation, run: Run, step: Step, spec: definition.StepDef | None,
                    workflow: definition.Workflow | None, lookups: bool) -> str:
    what = f"whether {step.name} took effect"
    if not lookups:
        card.unconfirmed.append(f"{what} (no lookup made for this report)")
        return "unconfirmed"
    if spec is None or spec.reconcile_fn is None or workflow is None:
        card.unconfirmed.append(f"{what}: nothing can look it up by key; check "
                                f"{step_contract(spec).evidence if spec else 'the remote system'}"
                                " by hand")
        return "unconfirmed"
    try:
        with context_outside_executor(run, step.name, definition=workflow,
                                      with_services=True) as ctx:
            verdict, error = ask_remote(spec, ctx)
    except TransitionNotAllowed as refusal:
        card.unconfirmed.append(f"{what}: {refusal}")
        return "unconfirmed"
    stamp = f"lookup by key {step.idempotency_key[:12]}… at {timezone.now():%H:%M:%S %Z}"
    if isinstance(verdict, definition.Found):
        card.facts.append(Fact(f"{step.name} took effect: found {verdict.ref}", stamp))
        return "exists"
    if isinstance(verdict, definition.NotFound):
        if spec.honours_key:
            card.facts.append(Fact(f"{step.name} is not in the remote system", stamp))
            return "does not exist"
        card.inferences.append(f"{step.name} was not found now ({stamp}); the receiver "
                               "ignores keys, so a request still in flight could land later")
        card.unconfirmed.append(f"{what}: not found, but not proof")
        return "unconfirmed"
    card.unconfirmed.append(f"{what}: the lookup could not tell: "
                            f"{getattr(verdict, 'reason', '') or error}")
    return "unconfirmed"


def _risks(card: Investigation, run: Run, steps: list[Step],
           workflow: definition.Workflow | None) -> None:
    unknown = [s for s in steps if s.status == StepStatus.UNKNOWN]
    for action in offered(run, steps):
        if action.name == "resume":
            unsafe = [s.name for s in unknown if (spec := _spec(workflow, s)) is None
                      or (spec.reconcile_fn is None and not spec.honours_key)]
            risk = (f"high: {', '.join(unsafe)} cannot be looked up and may be sent again"
                    if unsafe else "none: unknown steps are looked up by key first; a resend "
                    "carries the same key")
        elif action.name == "retry_step":
            targets = action.eligible_steps(run, steps)
            ignoring = [s.name for s in targets if (spec := _spec(workflow, s)) is not None
                        and s.kind in (definition.WRITE,
                                       definition.NOTIFY) and not spec.honours_key]
            risk = (f"low: {', '.join(ignoring)} go to a receiver that ignores keys, but the "
                    "failed attempt had evidence that nothing changed" if ignoring else
                    "none: the same key, deduplicated by the receiver (or a read)")
        elif action.name in ("reconcile", "ask_again", "reopen"):
            risk = "none: nothing is sent to another system"
        elif action.name in ("compensate", "confirm_compensation"):
            doubted = [s.name for s in steps if undo_outcome_unknown(s)]
            risk = (f"low: the undo of {', '.join(doubted)} may have been done already; it "
                    "is sent again with its compensation key, which a receiver that honours "
                    "keys answers once" if doubted else
                    "none for the original effects: each undo has its own key and is sent "
                    "once")
        elif action.name == "rerun_from_step":
            risk = _rerun_risk(action.eligible_steps(run, steps), steps)
        elif action.name in ("event_received", "skip_event", "wake_timer"):
            risk = ("none for what was sent: the run goes on to its later steps, each sent "
                    "for the first time with its own key")
        else:  # cancel, terminate
            standing = [f.step for f in card.steps if f.effect == "exists"]
            risk = ("none: nothing is sent; " + (f"effects that stay: {', '.join(standing)}"
                                                 if standing else "no effect stands"))
        card.risks.append(ActionRisk(action.name, action.label, risk))


def _rerun_risk(eligible: list[Step], steps: list[Step]) -> str:
    """A re-run sends the chosen step and every later one again with new keys, which no
    receiver can match to the first sending: each write or notification that stands from
    there on is made again (rerun_rules.standing_effects, which the re-run's dialog lists).
    From the first step it may start at, the most a re-run could send again."""
    first = min(eligible, key=lambda s: s.position) if eligible else None
    standing = list(dict.fromkeys(e.step for e in standing_effects(steps, first))) \
        if first is not None else []
    if not standing:
        return "none: no write or notification stands in the steps it would send again"
    return (f"high: it sends the steps again with new keys, so {', '.join(standing)} "
            "(which stand) would be made a second time unless compensated first")


def _verdict(card: Investigation, run: Run, steps: list[Step]):
    """The verdict and the next step; returns the action it advises (OperatorAction), or
    None."""
    if card.audit_chain == "broken":
        card.verdict = STOP
        card.next_step = (f"none until the audit chain is examined: it does not verify at "
                          f"record #{card.chain_broken_at}; nothing of this run should be "
                          "acted on from its history")
        return None
    advice = recommend(run, steps)
    if advice is None:
        card.verdict = GO
        card.next_step = "none: the run needs nobody"
        return None
    card.next_step = (f"{advice.action.label}{': ' + advice.step if advice.step else ''}: "
                      f"{advice.why}" if advice.action else advice.why)
    if advice.action is None:
        card.verdict = STOP
    elif card.unconfirmed and advice.action.name not in ("reconcile", "confirm_compensation"):
        card.verdict = LIMITED
    elif any(f.recovery in (NEEDS_PERSON, NEEDS_COMPENSATION) and f.effect == "unconfirmed"
             for f in card.steps):
        card.verdict = LIMITED
    else:
        card.verdict = GO
    return advice.action


def to_markdown(card: Investigation) -> str:
    """The card as Markdown, to paste into a ticket. Every value is written as text
    (markdown_text): a business key, a remote system's error message or reference is not
    the card's markup."""
    text = markdown_text
    lines = [f"# Investigation: run {card.run_id} ({text(card.workflow)} "
             f"{text(card.business_key)})", "",
             f"Made {card.made_at:%Y-%m-%d %H:%M:%S %Z}; state **{text(card.status)}**; "
             f"lookups {'made now' if card.lookups_made else 'not made'}.", "",
             f"**Verdict: {text(card.verdict)}.** Next: {text(card.next_step)}", "",
             f"Audit chain: {_chain_line(card)}.", "", "## Facts", ""]
    lines += [f"- {text(f.text)} _(evidence: {text(f.evidence)})_" for f in card.facts] \
        or ["- none"]
    lines += ["", "## Inferences (not observed)", ""]
    lines += [f"- _inference:_ {text(t)}" for t in card.inferences] or ["- none"]
    lines += ["", "## Unconfirmed", ""]
    lines += [f"- {text(t)}" for t in card.unconfirmed] or ["- nothing"]
    lines += ["", "## Steps", "",
              "| step | does | impact | status | effect | ref | recovery |",
              "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(text(v) for v in (
        s.step, s.does, s.impact, s.status + "".join(f" ({said})" for said in (
            s.wait_ended, s.approved_unasked) if said),
        s.effect, s.remote_ref or "-", s.recovery)) + " |" for s in card.steps]
    lines += ["", "## Duplicate risk of each possible action", ""]
    lines += [f"- {text(r.label)}: {text(r.duplicate_risk)}" for r in card.risks] \
        or ["- no action"]
    return "\n".join(lines) + "\n"


def _chain_line(card: Investigation) -> str:
    if card.audit_chain == "broken":
        return f"**broken at record #{card.chain_broken_at}**"
    return markdown_text(card.audit_chain) or "not verified"


# What Markdown reads as markup within a line: emphasis and strikethrough, code, links and
# images, autolinks and raw HTML, entities, a table's cell boundary, and the escape itself.
_MARKDOWN_INLINE = re.compile(r"([\\`*_\[\]<>!|~&])")


def markdown_text(value) -> str:
    """`value` as Markdown that shows it as it is, on one line. A remote system's error
    message or reference, a business key and a model's words reach the card: with a line
    break it would start a line of the card's own (a bold "Verdict: go." of its choosing,
    a heading, a list item), and within a line its [text](javascript:...) or
    ![](https://...) would be a live link or an image fetched by whoever opens the ticket,
    its <img onerror=...> raw HTML. Line breaks become spaces; the characters of inline
    markup are backslash-escaped (CommonMark shows an escaped punctuation mark as itself)."""
    return _MARKDOWN_INLINE.sub(r"\\\1", " ".join(str(value).splitlines()))
