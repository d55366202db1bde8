"""Every table linked to a run (directly or through another) is written to the archive by
its app, or declared transient with a reason; each app removes its own rows."""

import pytest
from django.apps import apps

from archive import parts
from runs.models import Run


def _linked_to_runs() -> set:
    """The models with a foreign key to Run, or to a model that has one, and so on."""
    linked, grew = {Run}, True
    while grew:
        grew = False
        for model in apps.get_models():
            if model in linked:
                continue
            if any(f.is_relation and f.many_to_one and f.related_model in linked
                   for f in model._meta.concrete_fields):
                linked.add(model)
                grew = True
    return linked


def test_every_model_linked_to_a_run_is_archived_or_declared_transient():
    archived = {m for part in parts.parts() for m in part.ARCHIVED}
    transient = {m for part in parts.parts() for m in part.TRANSIENT}

    missing = sorted(m._meta.label for m in _linked_to_runs() - archived - transient)

    assert missing == [], (f"{missing} hold rows of runs but no app's archival module "
                           "archives them or declares them transient")
    assert not archived & transient
    assert all(reason for part in parts.parts() for reason in part.TRANSIENT.values())


def test_each_app_that_holds_rows_of_runs_has_its_part():
    assert {part.__name__ for part in parts.parts()} == {
        "audit.archival", "approvals.archival", "api.archival", "runs.archival"}
    # Removal order: what points at runs goes before the runs.
    assert [part.__name__ for part in parts.parts()][-1] == "runs.archival"


@pytest.mark.django_db
def test_a_model_left_out_would_be_found(monkeypatch):
    from runs import archival

    monkeypatch.setattr(archival, "TRANSIENT", {})
    archived = {m for part in parts.parts() for m in part.ARCHIVED}
    transient = {m for part in parts.parts() for m in part.TRANSIENT}

    assert {m._meta.label for m in _linked_to_runs() - archived - transient} == {
        "runs.ApprovalWait"}


@pytest.mark.django_db
def test_webhook_deliveries_go_to_the_archive_with_their_run_and_leave_the_table(
        finished_run, archive_dir):
    import gzip
    import json
    import uuid

    from django.core.management import call_command
    from django.utils import timezone

    from api import webhook_cursors
    from api.models import WebhookDelivery, WebhookSubscriber
    from archive.models import ArchiveFile
    from runs.models import RunEvent

    run = finished_run(days=40)
    other = finished_run(days=1)  # stays hot, and so does its delivery
    # Registered after the runs, as api.subscribers does: told nothing older (a cursor at 0
    # would have the runs' other events still to queue, and hold them hot).
    subscriber = WebhookSubscriber.objects.create(name="erp", url="https://erp.example/h",
                                                  secret="s" * 40,
                                                  **webhook_cursors.cursors_at_head())
    for r in (run, other):
        WebhookDelivery.objects.create(
            subscriber=subscriber, event=RunEvent.objects.filter(run=r).first(),
            delivery_id=uuid.uuid4(), status="delivered", attempts=1,
            next_attempt_at=timezone.now(), last_status_code=204)

    call_command("archive_runs")

    assert list(WebhookDelivery.objects.values_list("event__run_id", flat=True)) == [other.pk]
    with gzip.open(archive_dir / ArchiveFile.objects.get().name, "rt") as handle:
        (line,) = [x for x in map(json.loads, handle) if x.get("run", {}).get("id") == run.pk]
    (delivery,) = line["webhook_deliveries"]
    assert delivery["status"] == "delivered" and delivery["last_status_code"] == 204
    assert "webhook_deliveries" in line["seal"]["digests"]
