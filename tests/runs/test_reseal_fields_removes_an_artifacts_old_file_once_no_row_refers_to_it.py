"""`reseal_fields` writes a step's artifact holding a sealed value anew, sealed under the key
in use, and points the step at the new file. The old file, whose values the retired key
opens (the key that leaked, maybe), stayed in the artifact storage for as long as the run
was kept. It is removed once the run's change has committed, unless a row still refers to
it: artifacts are named by their content, and a late result's record in the run's chain
keeps the reference it came with (the same file as its step's). A file the storage refuses
to remove is named by the command, the rows changed all the same."""

import io

import pytest
from django.core.files.storage import FileSystemStorage
from django.core.management import call_command

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import artifacts, sensitive, transitions
from runs.models import RunStatus, Step, StepStatus

pytestmark = pytest.mark.django_db(transaction=True)

OLD, NEW = "k-old", "k-new"
KEYS = {OLD: "A" * 43 + "=", NEW: "B" * 43 + "="}
IBAN = "DE89370400440532013000"
SYSTEM = Actor.system("test")


@pytest.fixture
def account_step(settings, tmp_path):
    """A workflow whose one step returns a bank account it declares sensitive, large enough
    to be kept as an artifact (in a storage of this test's own: a run's files are listed)."""
    from runs.definitions import definition
    from runs.definitions.definition import Workflow
    from tests.workflows import OrderIn

    workflow = Workflow("test-reseal-artifact", version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return account()

    settings.FIELD_ENCRYPTION_KEYS = {OLD: KEYS[OLD]}
    settings.RUNS_RESULT_INLINE_BYTES = 64
    settings.VAR_DIR = tmp_path
    yield workflow
    definition.registry.unregister(workflow)


def account() -> dict:
    return {"holder": "ACME", "iban": IBAN, "note": "n" * 200}


def start(key: str):
    run, _ = transitions.start_run(workflow="test-reseal-artifact", business_key=key,
                                   input={"order": "o-1"}, actor=SYSTEM)
    return run


def reseal(settings) -> str:
    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW], OLD: KEYS[OLD]}
    out = io.StringIO()
    call_command("reseal_fields", "--reason", "k-old leaked", stdout=out)
    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW]}  # the old key leaves the ring
    return out.getvalue()


def files_of(run) -> list[str]:
    _, files = artifacts.storage().listdir(f"runs/{run.pk}")
    return sorted(f"runs/{run.pk}/{name}" for name in files)


def opened(reference) -> dict:
    return sensitive.opened(artifacts.load(reference))


def test_the_old_file_is_removed_and_the_new_one_opens_with_the_new_key(account_step,
                                                                         settings):
    run = start("acct-removed")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    old = Step.objects.get(run=run, name="fetch-account").result
    assert artifacts.is_artifact(old) and files_of(run) == [old[artifacts.ARTIFACT]]

    said = reseal(settings)

    new = Step.objects.get(run=run, name="fetch-account").result
    assert new[artifacts.ARTIFACT] != old[artifacts.ARTIFACT]
    assert opened(new) == account()
    assert not artifacts.storage().exists(old[artifacts.ARTIFACT])
    assert files_of(run) == [new[artifacts.ARTIFACT]]  # exactly one file: the new one
    assert "not removed" not in said
    assert AuditRecord.objects.filter(run=run, action=AuditAction.FIELDS_RESEALED).count() == 1


def test_a_file_a_late_results_record_refers_to_stays(account_step, settings):
    run = start("acct-late")
    lease = transitions.claim_run(run.pk, worker="w1")
    assert lease.work.name == "fetch-account"
    transitions.terminate(run.pk, actor=SYSTEM, reason="duplicate account request")
    # The worker's result arrives after the end: kept as the executor keeps it (sealed, then
    # an artifact), recorded on the step and in the late result's record alike.
    reference, _ = artifacts.kept_result(run.pk, "fetch-account",
                                         sensitive.seal_fields(account(), ("iban",)),
                                         has_side_effect=False)
    transitions.record_outcome(lease, lease.work,
                               transitions.Outcome(True, value=reference))
    step = Step.objects.get(run=run, name="fetch-account")
    assert step.status == StepStatus.SUCCEEDED and step.result == reference
    (late,) = AuditRecord.objects.filter(run=run, action=AuditAction.LATE_RESULT_RECORDED)
    assert late.data["value"] == reference

    said = reseal(settings)

    new = Step.objects.get(run=run, name="fetch-account").result
    assert new[artifacts.ARTIFACT] != reference[artifacts.ARTIFACT]
    assert opened(new) == account()
    # Still the record's, as it was written: kept, and its bytes those its reference names.
    assert AuditRecord.objects.get(pk=late.pk).data["value"] == reference
    assert artifacts.read(reference)
    assert files_of(run) == sorted([reference[artifacts.ARTIFACT], new[artifacts.ARTIFACT]])
    assert "not removed" not in said


class KeepingStorage(FileSystemStorage):
    """An artifact storage that refuses to delete (an object store's permissions)."""

    def delete(self, name):
        raise PermissionError(f"delete refused for {name}")


def test_a_file_the_storage_refuses_to_remove_is_named_and_the_run_is_resealed(
        account_step, settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "artifacts": {
        "BACKEND": f"{__name__}.KeepingStorage", "OPTIONS": {"location": tmp_path / "kept"}}}
    run = start("acct-kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    old = Step.objects.get(run=run, name="fetch-account").result

    said = reseal(settings)

    new = Step.objects.get(run=run, name="fetch-account").result
    assert opened(new) == account()
    assert files_of(run) == sorted([old[artifacts.ARTIFACT], new[artifacts.ARTIFACT]])
    assert ("not removed (remove it from the artifact storage by hand): the old file of an "
            f"artifact written anew, {old[artifacts.ARTIFACT]} (PermissionError: delete "
            "refused for") in said
    assert f"no stored value names another key than '{NEW}'" in said
    assert AuditRecord.objects.filter(run=run, action=AuditAction.FIELDS_RESEALED).count() == 1
