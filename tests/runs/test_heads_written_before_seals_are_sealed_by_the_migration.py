"""Runs whose chains existed before heads were sealed carry no seal: the data step of runs
0048 (and of audit 0008, for the access chain's head) seals them, in batches by id, so that
verify_audit refuses an unsealed head from then on."""

import importlib
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from audit.access import AccessAction, record_access_change
from audit.chain import Actor
from audit.head_seals import ACCESS_CHAIN, head_seal_problem
from audit.models import AccessChainHead
from runs.execution import executor
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db

runs_migration = importlib.import_module("runs.migrations.0048_run_audit_seal")
audit_migration = importlib.import_module("audit.migrations.0008_access_head_seal")


def historical(app: str, name: str):
    """The models as the migration `name` of `app` sees them."""
    return MigrationLoader(connection).project_state((app, name)).apps


def test_the_data_step_seals_every_head_written_without_a_seal(capsys):
    runs = [new_run(wake=False) for _ in range(5)]
    executor.advance_run(runs[0].pk, worker="w1")
    empty = Run.objects.create(**{f.attname: getattr(runs[1], f.attname)
                                  for f in Run._meta.concrete_fields
                                  if f.attname not in ("id", "listed_step")}
                               | {"business_key": "seeded", "audit_seq": 0, "audit_head": "",
                                  "audit_seal": None})
    # As the rows were before the column: no seal (NULL), or an empty one.
    Run.objects.filter(pk__in=[r.pk for r in runs[:4]]).update(audit_seal=None)
    Run.objects.filter(pk=runs[4].pk).update(audit_seal="")
    with pytest.raises(CommandError, match=f"audit chain of run {runs[0].pk} .*its head "
                                           "carries no seal"):
        call_command("verify_audit")

    last, batches = 0, 0
    while last is not None:  # two a batch: the batches go on by id past each other
        last = runs_migration.seal_batch(Run.objects, after=last, batch=2)
        batches += 1
    assert batches == 4

    for run in Run.objects.filter(pk__in=[r.pk for r in runs]):
        assert head_seal_problem(run.pk, run.audit_seq, run.audit_head, run.audit_seal) is None
    assert Run.objects.get(pk=empty.pk).audit_seal is None  # an empty chain has no head
    # A run with no chain at all is named by verify_audit for what it is (every run is
    # started with its first record), sealed or not: the migration's part ends here.
    with pytest.raises(CommandError, match=f"run {empty.pk} has no records and its run keeps "
                                           "no head"):
        call_command("verify_audit")
    Run.objects.filter(pk=empty.pk).delete()
    call_command("verify_audit")
    assert "all chains intact, every head sealed" in capsys.readouterr().out


def test_the_data_step_leaves_sealed_heads_as_they_are(settings):
    run = new_run(wake=False)
    sealed = Run.objects.get(pk=run.pk).audit_seal
    settings.AUDIT_SEAL_KEYS = {"k2": "another-secret-" + "x" * 40, **settings.AUDIT_SEAL_KEYS}
    assert runs_migration.seal_batch(Run.objects, after=0) is None
    assert Run.objects.get(pk=run.pk).audit_seal == sealed


def test_the_migration_runs_the_data_step_over_the_whole_table():
    runs = [new_run(wake=False) for _ in range(3)]
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(audit_seal=None)
    runs_migration.seal_existing_heads(historical("runs", "0048_run_audit_seal"),
                                       SimpleNamespace(connection=connection))
    assert not Run.objects.filter(pk__in=[r.pk for r in runs], audit_seal__isnull=True).exists()
    call_command("verify_audit")


def test_the_access_chains_head_is_sealed_by_its_migration(capsys):
    record_access_change(action=AccessAction.API_TOKEN_CREATED, subject="token a",
                         actor=Actor.system("test"), before={}, after={})
    AccessChainHead.objects.filter(pk=1).update(seal="")
    with pytest.raises(CommandError, match="the access chain's head seq=1 .*its head carries "
                                           "no seal"):
        call_command("verify_audit")

    audit_migration.seal_access_head(historical("audit", "0008_access_head_seal"),
                                     SimpleNamespace(connection=connection))

    head = AccessChainHead.objects.get(pk=1)
    assert head_seal_problem(ACCESS_CHAIN, head.seq, head.hash, head.seal) is None
    call_command("verify_audit")
    assert "chain intact, its head sealed" in capsys.readouterr().out
