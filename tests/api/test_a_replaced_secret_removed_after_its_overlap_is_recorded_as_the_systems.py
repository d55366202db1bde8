"""A webhook subscriber's replaced secret signs beside the new one until its overlap ends;
then the publisher removes it, and the access chain records that removal: one record per
subscriber whose overlap ended, the system's (no person named), in the transaction of the
removal, saying until when it signed and never what either secret was. A later pass, with
nothing left to remove, records nothing."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from api import webhooks
from api.models import WebhookSubscriber
from api.subscribers import subscriber_create, subscriber_save
from audit.access import AccessAction, verify_access_chain
from audit.models import AccessRecord, AuditRecord

pytestmark = pytest.mark.django_db

OLD, NEW = "whsec-old-4711-receivers-know", "whsec-new-0815-being-rolled-out"


def _subscriber(name: str, root) -> WebhookSubscriber:
    made = WebhookSubscriber(name=name, url=f"http://127.0.0.1:9/{name}", secret=OLD)
    subscriber_create(made, by=root)
    return WebhookSubscriber.objects.get(pk=made.pk)


def _replace_secret(subscriber: WebhookSubscriber, root) -> WebhookSubscriber:
    subscriber.secret = NEW
    subscriber_save(subscriber, by=root)
    return WebhookSubscriber.objects.get(pk=subscriber.pk)


def _overlap_ends(subscriber: WebhookSubscriber) -> None:
    # As tests/api/test_a_subscribers_replaced_secret_signs_beside_the_new_one_until_its_
    # overlap_ends.py moves past it: the end the replacement set, a second ago.
    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(
        previous_secret_until=timezone.now() - timedelta(seconds=1))


def test_the_removal_is_one_record_of_the_systems_naming_no_secret(db):
    root = User.objects.create_superuser("root")
    erp = _replace_secret(_subscriber("erp", root), root)
    # Still within its overlap: kept, and its removal not recorded by any pass.
    crm = _replace_secret(_subscriber("crm", root), root)
    sealed_previous = erp.previous_secret
    _overlap_ends(erp)
    until = WebhookSubscriber.objects.get(pk=erp.pk).previous_secret_until
    before = AccessRecord.objects.count()
    run_records = AuditRecord.objects.count()

    webhooks.publish()

    stored = WebhookSubscriber.objects.get(pk=erp.pk)
    assert stored.previous_secret == "" and stored.previous_secret_until is None
    kept = WebhookSubscriber.objects.get(pk=crm.pk)
    assert kept.previous_secret and kept.previous_secret_until > timezone.now()
    added = list(AccessRecord.objects.filter(seq__gt=before).order_by("seq"))
    assert len(added) == 1
    removal = added[0]
    assert removal.action == AccessAction.WEBHOOK_SUBSCRIBER_CHANGED
    assert removal.subject == "webhook subscriber erp"
    assert (removal.actor_kind, removal.actor_user_id) == ("system", None)
    assert removal.actor_label != "root"
    assert removal.before == {"previous_secret": "(not recorded)",
                              "previous_secret_signs_until": until.isoformat()}
    assert removal.after == {"previous_secret": "removed: its overlap ended"}
    text = str(AccessRecord.objects.filter(pk=removal.pk).values().get())
    for secret in (OLD, NEW, sealed_previous, stored.secret):
        assert secret not in text
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None
    assert AuditRecord.objects.count() == run_records

    webhooks.publish()

    assert AccessRecord.objects.count() == before + 1


def test_each_subscriber_whose_overlap_ended_has_its_own_record(db):
    root = User.objects.create_superuser("root")
    ended = [_replace_secret(_subscriber(name, root), root) for name in ("erp", "crm")]
    for subscriber in ended:
        _overlap_ends(subscriber)
    before = AccessRecord.objects.count()

    webhooks.publish()

    assert sorted(AccessRecord.objects.filter(seq__gt=before)
                  .values_list("subject", flat=True)) == [
        "webhook subscriber crm", "webhook subscriber erp"]
    assert not WebhookSubscriber.objects.exclude(previous_secret="").exists()
