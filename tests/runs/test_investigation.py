"""The recommended next action and the investigation card: read-only, facts with evidence
kept apart from inferences, and never recommending what the transitions would refuse."""

import pytest

from audit.models import AuditRecord
from runs.execution import executor
from runs.machine.errors import PermanentError, TransientError, UnknownOutcome
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.guidance import recommend
from runs.operator.investigation import LIMITED, investigate, to_markdown
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _steps(run):
    return list(Step.objects.filter(run=run).order_by("position"))


def _stuck(script, **plan):
    for step, actions in plan.items():
        script.plan[step] = actions
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk)


def _unchanged(run):
    run = Run.objects.get(pk=run.pk)
    return (run.status, run.audit_seq, list(Step.objects.filter(run=run)
                                            .values_list("status", "attempt")))


def test_an_unknown_high_impact_outcome_recommends_a_lookup_by_key(script):
    run = _stuck(script, **{"post-ledger": [UnknownOutcome("timeout after send")]})
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    advice = recommend(run, _steps(run))
    assert advice.action.name == "reconcile" and advice.step == "post-ledger"
    assert "whether post-ledger took effect" in advice.unknown[0]
    assert any("create-task: done" in fact for fact in advice.known)
    assert advice.reason == "unknown_outcome"


def test_a_permanent_error_recommends_retrying_the_step_after_fixing_the_cause(script):
    run = _stuck(script, **{"create-task": [PermanentError("403 from tracker")]})
    advice = recommend(run, _steps(run))
    assert advice.action.name == "retry_step" and advice.step == "create-task"
    assert "Fix the cause" in advice.why


def test_a_spent_budget_recommends_retry_and_a_completed_run_recommends_nothing(script):
    run = _stuck(script, **{"create-task": [TransientError("503")] * 3})
    for _ in range(3):
        Run.objects.filter(pk=run.pk).update(next_wake_at=run.created_at)
        executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.BUDGET_EXHAUSTED
    assert recommend(run, _steps(run)).action.name == "retry_step"
    done = new_run()
    executor.advance_run(done.pk, worker="w1")
    assert recommend(Run.objects.get(pk=done.pk), _steps(done)) is None


def test_what_the_transitions_refuse_is_never_the_recommended_action(script):
    # Compensation failed while another step is unknown: compensate would be refused.
    run = place(new_run(), status=RunStatus.COMPENSATION_FAILED,
                attention_reason=AttentionReason.COMPENSATION_FAILED,
                step_statuses={"create-task": StepStatus.COMPENSATION_FAILED,
                               "post-ledger": StepStatus.UNKNOWN})
    advice = recommend(run, _steps(run))
    assert advice.action is None or advice.action.refusal(run, _steps(run)) is None


def test_the_card_keeps_facts_with_evidence_apart_from_inferences_and_changes_nothing(script):
    run = _stuck(script, **{"post-ledger": [UnknownOutcome("timeout after send")]})
    before = _unchanged(run)
    card = investigate(run)
    assert _unchanged(run) == before
    created = next(f for f in card.facts if f.text.startswith("create-task took effect"))
    seq = AuditRecord.objects.filter(run=run, step_name="create-task",
                                     action="succeeded").latest("seq").seq
    assert created.evidence == f"audit #{seq}"
    assert any("whether post-ledger took effect (no lookup made" in u for u in card.unconfirmed)
    effects = {s.step: s.effect for s in card.steps}
    assert effects == {"fetch": "none", "classify": "none", "create-task": "exists",
                       "post-ledger": "unconfirmed"}
    assert {r.action for r in card.risks} >= {"reconcile", "terminate"}
    # A high-impact effect nobody has confirmed: a person goes carefully.
    assert card.verdict == LIMITED and card.next_step.startswith("Reconcile: post-ledger")


def test_a_lookup_made_for_the_card_turns_the_unknown_into_a_fact_without_settling_it(script):
    run = _stuck(script, **{"post-ledger": [UnknownOutcome("timeout after send")]})
    # The ledger committed after all (a slow write that landed after the first lookup).
    key = Step.objects.get(run=run, name="post-ledger").idempotency_key
    script.effects[key] = "L-42"
    before = _unchanged(run)
    card = investigate(run, lookups=True)
    assert _unchanged(run) == before  # the card looked; it did not settle
    fact = next(f for f in card.facts if f.text == "post-ledger took effect: found L-42")
    assert fact.evidence.startswith("lookup by key")
    assert {s.step: s.effect for s in card.steps}["post-ledger"] == "exists"
    assert not card.unconfirmed


def test_an_unconfirmed_effect_without_a_lookup_limits_the_verdict(script):
    run = place(new_run("test-unsafe"), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.UNKNOWN_OUTCOME,
                step_statuses={"post-unkeyed": StepStatus.UNKNOWN})
    card = investigate(run, lookups=True)
    assert any("nothing can look it up" in u for u in card.unconfirmed)
    assert card.verdict == LIMITED
    assert {r.action: r.duplicate_risk for r in card.risks}["resume"].startswith(
        "high: post-unkeyed")


def test_the_markdown_export_marks_inferences_and_escapes_table_cells(script):
    run = _stuck(script, **{"post-ledger": [UnknownOutcome("timeout after send")]})
    Step.objects.filter(run=run, name="create-task").update(remote_ref="T|1")
    text = to_markdown(investigate(run))
    assert text.startswith(f"# Investigation: run {run.pk}")
    assert "## Inferences (not observed)" in text and "**Verdict: limited.**" in text
    assert "T\\|1" in text
