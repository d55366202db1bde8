"""Four eyes from the shell: the CLI cannot name a second person, nor a first. An action
is taken, and an action that needs a second person asks for one, only as a user who gave
their password; the second person decides it as themselves (here with run_action --decide,
proving who they are with their password), and no audit record names a person who did not
act."""

import io

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command

from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _cli(*args) -> str:
    out = io.StringIO()
    call_command("run_action", *map(str, args), stdout=out)
    return out.getvalue()


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    operators = Group.objects.get(name="operators")
    olga = User.objects.create_user("olga", password="olga-secret")
    carl = User.objects.create_user("carl", password="carl-secret")
    for user in (olga, carl):
        user.groups.add(operators)
    return olga, carl


@pytest.fixture
def effected_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


def _names_in_audit(run) -> set[str]:
    names = set()
    for record in AuditRecord.objects.filter(run=run):
        names.add(record.actor_label)
        names.update(v for k, v in (record.data or {}).items()
                     if k in ("approved_by", "decided_by", "by") and isinstance(v, str))
    return names


def test_approved_by_is_gone_and_naming_a_colleague_does_nothing(people, effected_run,
                                                                 monkeypatch):
    monkeypatch.setenv("CLI_PASSWORD", "olga-secret")
    with pytest.raises(CommandError, match="unrecognized arguments: '--approved-by' 'carl'"):
        _cli(effected_run.pk, "terminate", "--user", "olga", "--reason", "fraud",
             "--approved-by", "carl")
    assert Run.objects.get(pk=effected_run.pk).status == RunStatus.ATTENTION
    assert not ApprovalRequest.objects.filter(run=effected_run).exists()
    assert "carl" not in _names_in_audit(effected_run)


def test_the_second_person_decides_as_themselves_from_the_shell(people, effected_run,
                                                                 monkeypatch):
    olga, carl = people
    monkeypatch.setenv("CLI_PASSWORD", "olga-secret")
    out = _cli(effected_run.pk, "terminate", "--user", "olga", "--reason", "fraud")
    request = ApprovalRequest.objects.get(run=effected_run, action="terminate")
    assert f"--decide {request.pk}" in out
    assert Run.objects.get(pk=effected_run.pk).status == RunStatus.ATTENTION

    # Olga cannot decide her own request, even with her own password.
    with pytest.raises(CommandError, match="may not decide"):
        _cli("--decide", request.pk, "--user", "olga")
    # Naming carl without carl's password decides nothing.
    with pytest.raises(CommandError, match="wrong password for carl"):
        _cli("--decide", request.pk, "--user", "carl")
    request.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.decided_by_id is None
    assert Run.objects.get(pk=effected_run.pk).status == RunStatus.ATTENTION
    assert "carl" not in _names_in_audit(effected_run)

    monkeypatch.setenv("CLI_PASSWORD", "carl-secret")
    out = _cli("--decide", request.pk, "--user", "carl", "--comment", "checked the ledger")
    assert "recorded" in out
    assert Run.objects.get(pk=effected_run.pk).status == RunStatus.TERMINATED
    record = AuditRecord.objects.get(run=effected_run, action="terminated")
    assert record.actor_label == "olga" and record.data["approved_by"] == "carl"
    request.refresh_from_db()
    assert request.decided_by_id == carl.pk and request.status == RequestStatus.APPROVED
    # Everyone the trail names acted: olga asked, carl decided, the rest is the system.
    people_named = _names_in_audit(effected_run) & set(
        User.objects.values_list("username", flat=True))
    assert people_named == {"olga", "carl"}


def test_a_rejection_from_the_shell_leaves_the_run_as_it_was(people, effected_run,
                                                            monkeypatch):
    monkeypatch.setenv("CLI_PASSWORD", "olga-secret")
    _cli(effected_run.pk, "compensate", "--user", "olga", "--reason", "undo it")
    request = ApprovalRequest.objects.get(run=effected_run, action="compensate")
    before = Run.objects.get(pk=effected_run.pk)
    monkeypatch.setenv("CLI_PASSWORD", "carl-secret")
    _cli("--decide", request.pk, "--user", "carl", "--reject", "--comment", "no")
    after = Run.objects.get(pk=effected_run.pk)
    assert (after.status, list(after.steps.values_list("status", flat=True))) == (
        before.status, list(before.steps.values_list("status", flat=True)))
    assert not AuditRecord.objects.filter(run=effected_run,
                                          action="compensation_started").exists()


def test_one_person_cannot_be_both_people_by_naming_the_first(people, effected_run,
                                                                monkeypatch):
    # Carl, who knows only his own password, names olga as the one asking, to decide it
    # himself: nothing is asked for, nothing is done, nobody is named.
    monkeypatch.setenv("CLI_PASSWORD", "carl-secret")
    with pytest.raises(CommandError, match="wrong password for olga; nothing was done"):
        _cli(effected_run.pk, "terminate", "--user", "olga", "--reason", "fraud")
    assert not ApprovalRequest.objects.filter(run=effected_run).exists()
    assert Run.objects.get(pk=effected_run.pk).status == RunStatus.ATTENTION
    assert "olga" not in _names_in_audit(effected_run)


def test_without_a_terminal_or_a_password_nothing_is_done(people, effected_run,
                                                           monkeypatch):
    monkeypatch.delenv("CLI_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(CommandError, match="no password given for olga .*CLI_PASSWORD"):
        _cli(effected_run.pk, "terminate", "--user", "olga", "--reason", "fraud")
    assert not ApprovalRequest.objects.filter(run=effected_run).exists()
    assert "olga" not in _names_in_audit(effected_run)
