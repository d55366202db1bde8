"""manage.py show_run --user NAME shows a run as NAME reads it: where NAME may not take the
advised next step, its next: line (and --json's next_step.text) says who may, in the words
of NAME's investigation card (the run page's, GET /api/runs/{id}/investigation's); a person
who may act reads it as the command without --user prints it. A run NAME may not view is
refused, and so is a user who does not exist."""

import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from audit.models import AuditRecord
from runs.execution import executor
from runs.machine.errors import UnknownOutcome
from runs.models import Run, Step
from runs.operator.guidance import recommend
from runs.operator.investigation import investigate
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _show(run, *args) -> str:
    out = io.StringIO()
    call_command("show_run", str(run.pk), *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def unknown_posting(script):
    script.plan["post-ledger"] = [UnknownOutcome("timeout after send")]
    run = new_run(wake=False)
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk)


def test_a_reader_who_may_not_reconcile_is_told_who_may_as_their_card_says(
        unknown_posting, auditor, client_for):
    run = unknown_posting
    advice = recommend(run, list(Step.objects.filter(run=run).order_by("position")))
    expected = (f"Reconcile: post-ledger: {advice.why.rstrip('.')}. aude may not reconcile "
                "this run: it needs someone who holds runs.reconcile_run (Can reconcile "
                "steps) on test-orders.")
    assert investigate(run, reader=auditor).next_step == expected
    page = client_for(auditor).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "aude may not reconcile this run" in page

    records = AuditRecord.objects.count()
    assert f"  next: {expected}\n" in _show(run, "--user", "aude")
    shown = json.loads(_show(run, "--user", "aude", "--json"))
    assert shown["next_step"]["text"] == expected
    assert shown["next_step"]["action"] == "reconcile"
    # It only reads: nothing recorded, the step still unknown.
    assert AuditRecord.objects.count() == records
    assert Step.objects.get(run=run, name="post-ledger").status == "unknown"


def test_a_reader_who_may_reconcile_reads_the_advice_unchanged(unknown_posting, operator):
    run = unknown_posting
    plain = _show(run)
    as_olga = _show(run, "--user", "olga")
    assert as_olga == plain
    assert "may not" not in as_olga
    assert investigate(run, reader=operator).next_step in as_olga


def test_a_run_the_user_may_not_view_and_an_unknown_user_are_refused(unknown_posting):
    run = unknown_posting
    User.objects.create_user("nobody", password="pw")
    with pytest.raises(CommandError) as refused:
        _show(run, "--user", "nobody")
    assert str(refused.value) == (f"nobody may not view run {run.pk} (needs runs.view_runs "
                                  "on test-orders)")
    with pytest.raises(CommandError) as unknown:
        _show(run, "--user", "ghost")
    assert str(unknown.value) == "no user 'ghost'"
