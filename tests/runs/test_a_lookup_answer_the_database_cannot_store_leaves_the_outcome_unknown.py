"""A lookup by key answers with what PostgreSQL cannot store (a NUL in its result or its
reference, NaN, an object JSON has no form for, a reference whose text cannot be read, a
reason with a NUL). Nobody can use an answer that cannot be recorded: the lookup could not
tell, the outcome stays unknown, and the run goes to a person at once with the problem named,
in a checkpoint that commits, instead of failing the same checkpoint at every attempt and
asking the lookup again each time (runs.machine.lookups.unusable_answer)."""

import pytest

from runs.definitions.definition import Found, Undetermined
from runs.execution import executor
from runs.models import AttentionReason, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import orders

pytestmark = pytest.mark.django_db(transaction=True)


class Unreadable:
    def __str__(self):
        raise RuntimeError("no text for this reference")


ANSWERS = {
    "nul-in-result": (lambda: Found("M-1", {"x": "a\x00"}),
                      "NUL characters cannot be stored (at $.x)"),
    "nan-in-result": (lambda: Found("M-1", {"x": float("nan")}),
                      "nan is not a finite number (at $.x)"),
    "object-in-result": (lambda: Found("M-1", {"x": object()}),
                         "Object of type object is not JSON serializable"),
    "nul-in-ref": (lambda: Found("M-\x00"),
                   "NUL characters cannot be stored (in its remote reference)"),
    # Never read through its own __str__, which may raise or name another effect.
    "unreadable-ref": (lambda: Found(Unreadable()),
                       "lookup returned a reference that is no text (Unreadable)"),
    "ref-too-long": (lambda: Found("M-" + "9" * 400),
                     "it is 402 characters long, longer than the 300 kept (in its remote "
                     "reference)"),
    "nul-in-reason": (lambda: Undetermined("cannot \x00 tell"),
                      "reason that cannot be stored: NUL characters cannot be stored: "
                      "cannot \\x00 tell"),
}


@pytest.mark.parametrize("answer", ANSWERS, ids=list(ANSWERS))
def test_an_answer_that_cannot_be_stored_goes_to_a_person_at_once(script, monkeypatch, answer):
    script.reset()
    make_answer, problem = ANSWERS[answer]
    asked = []

    def lookup(ctx):
        asked.append(ctx.key)
        return make_answer()

    monkeypatch.setattr(orders.step("create-task"), "reconcile_fn", lookup)
    script.plan["create-task"] = ["effect-then-raise"]
    run = new_run()
    # The checkpoint commits: advance_run returns, with the run waiting for a person.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    task = step(run, "create-task")
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert task.status == StepStatus.UNKNOWN  # never relabelled failed, nor found
    assert task.remote_ref == "" and task.result is None
    assert "reconciliation could not tell" in task.error_message
    assert problem in task.error_message and problem in run.status_message
    assert "\x00" not in task.error_message + run.status_message
    # Asked once, the step sent once; nothing asked or sent again, nothing after it began.
    assert asked == [task.idempotency_key]
    assert [call[0] for call in script.calls] == ["fetch", "classify", "create-task"]
    assert step(run, "post-ledger").attempt == 0
    assert run.lease_owner == ""
    assert executor.advance_run(run.pk, worker="w1") is None
    assert len(asked) == 1
