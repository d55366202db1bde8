"""manage.py run_action does what it was asked or refuses, naming what is wrong: an option the
chosen action does not read, a decision about another run than the one named, text the
database cannot store. Its list of what a run offers is what the named user may do."""

import io
import json

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command

from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _run_action(*args) -> str:
    out = io.StringIO()
    call_command("run_action", *map(str, args), stdout=out)
    return out.getvalue()


def _unchanged(run) -> tuple:
    return (Run.objects.get(pk=run.pk).status,
            list(AuditRecord.objects.filter(run=run).values_list("seq", flat=True)))


@pytest.fixture
def effected_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


@pytest.fixture
def carl(operator):
    user = User.objects.create_user("carl", password="carl-pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


@pytest.mark.parametrize("extra, named", [
    (["--step", "create-task", "--mode", "not_found", "--remote-ref", "R", "--evidence", "E"],
     "--step, --mode, --remote-ref, --evidence do not apply with resume"),
    (["--reject"], "--reject does not apply without --decide"),
    (["--comment", "fine"], "--comment does not apply without --decide"),
])
def test_options_the_action_does_not_read_are_refused_not_dropped(operator, stuck_run, extra,
                                                                  named):
    before = _unchanged(stuck_run)
    with pytest.raises(CommandError, match=named):
        _run_action(stuck_run.pk, "resume", "--user", "olga", "--reason", "fixed", *extra)
    assert _unchanged(stuck_run) == before
    assert "Resume: done" in _run_action(stuck_run.pk, "resume", "--user", "olga",
                                         "--reason", "fixed")


def test_reconcile_refuses_what_its_mode_does_not_read(operator, stuck_run):
    before = _unchanged(stuck_run)
    with pytest.raises(CommandError, match="--evidence does not apply with reconcile --mode "
                                           "ask"):
        _run_action(stuck_run.pk, "reconcile", "--user", "olga", "--reason", "x",
                    "--step", "create-task", "--evidence", "seen")
    with pytest.raises(CommandError, match="--remote-ref does not apply with reconcile --mode "
                                           "not_found"):
        _run_action(stuck_run.pk, "reconcile", "--user", "olga", "--reason", "x",
                    "--step", "create-task", "--mode", "not_found", "--remote-ref", "T-1",
                    "--evidence", "seen")
    with pytest.raises(CommandError, match="--reason does not apply without an action"):
        _run_action(stuck_run.pk, "--user", "olga", "--reason", "x")
    assert _unchanged(stuck_run) == before


def test_decide_refuses_a_run_or_action_other_than_the_requests(carl, effected_run,
                                                                monkeypatch):
    other = place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.SUCCEEDED,
                                 "post-ledger": StepStatus.SUCCEEDED})
    _run_action(effected_run.pk, "terminate", "--user", "olga", "--reason", "fraud")
    request = ApprovalRequest.objects.get(run=effected_run, action="terminate")
    monkeypatch.setenv("CLI_PASSWORD", "carl-pw")
    cases = [
        ([other.pk, "terminate"], f"about terminate of run {effected_run.pk}, not terminate "
                                  f"of run {other.pk}"),
        ([effected_run.pk, "cancel"], "about terminate .* not cancel"),
        ([other.pk], f"not an action of run {other.pk}"),
    ]
    for named, message in cases:
        with pytest.raises(CommandError, match=message):
            _run_action(*named, "--decide", request.pk, "--user", "carl")
    with pytest.raises(CommandError, match="--reason does not apply with --decide"):
        _run_action("--decide", request.pk, "--user", "carl", "--reason", "ok")
    request.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.decided_by_id is None
    assert Run.objects.get(pk=other.pk).status == RunStatus.ATTENTION

    # Naming the request's own run and action decides it, as --decide alone does.
    _run_action(effected_run.pk, "terminate", "--decide", request.pk, "--user", "carl")
    request.refresh_from_db()
    assert request.status == RequestStatus.APPROVED and request.decided_by == carl


def test_the_list_shows_as_offered_only_what_the_user_may_do(operator, auditor, stuck_run):
    mine = json.loads(_run_action(stuck_run.pk, "--user", "olga", "--json"))
    assert {a["action"] for a in mine if a["offered"]} >= {"resume", "retry_step"}
    theirs = json.loads(_run_action(stuck_run.pk, "--user", "aude", "--json"))
    assert not any(a["offered"] or a["permitted"] for a in theirs)
    lines = dict(line.split(None, 1)
                 for line in _run_action(stuck_run.pk, "--user", "aude").splitlines())
    assert "offered" not in lines.values()
    assert lines["resume"] == (f"-: aude may not resume run {stuck_run.pk} "
                               "(needs runs.resume_run)")


@pytest.mark.parametrize("option, text, problem", [
    ("--user", "op\udcff", "--user: not valid Unicode text"),
    # An action's own fields are named as every door names them (field_refused).
    ("--reason", "bad\udcff", "Retry step was not done: reason: not valid Unicode text"),
    ("--reason", "bad\x00", "Retry step was not done: reason: NUL characters"),
    ("--step", "create\udcff", "Retry step was not done: step: not valid Unicode text"),
])
def test_text_the_database_cannot_store_is_refused_by_name(operator, stuck_run, option, text,
                                                           problem):
    args = {"--user": "olga", "--reason": "fixed", "--step": "create-task", option: text}
    before = _unchanged(stuck_run)
    with pytest.raises(CommandError, match=f"^{problem}"):
        _run_action(stuck_run.pk, "retry_step", *[x for pair in args.items() for x in pair])
    assert _unchanged(stuck_run) == before


def test_an_unknown_step_is_named_as_the_runs(operator, stuck_run):
    with pytest.raises(CommandError, match=f"run {stuck_run.pk} has no step 'nosuch'"):
        _run_action(stuck_run.pk, "reconcile", "--user", "olga", "--reason", "x",
                    "--step", "nosuch")


def test_an_unknown_step_of_any_length_is_named_in_a_line_of_bounded_length(operator,
                                                                            stuck_run):
    before = _unchanged(stuck_run)
    with pytest.raises(CommandError) as refused:
        _run_action(stuck_run.pk, "retry_step", "--user", "olga", "--reason", "x",
                    "--step", "s" * 90_000)
    said = str(refused.value)
    assert f"run {stuck_run.pk} has no step '{'s' * 120}'... (90000 characters)" in said
    assert len(said) < 400
    assert _unchanged(stuck_run) == before
