"""Retiring a key of AUDIT_SEAL_KEYS: `manage.py reseal_audit_heads` seals every head sealed
with another key again with the key that signs now, once verify_audit passed, and says so in
the access chain; then the old key can leave the ring and every chain still verifies. A
chain that does not verify is never vouched for: nothing is sealed again."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.access import AccessAction, record_access_change
from audit.chain import Actor
from audit.models import AccessRecord
from runs.execution import executor
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db

OLD, NEW = "k1", "k2"
RING = {NEW: "the-new-secret-" + "n" * 40, OLD: "the-old-secret-" + "o" * 40}


def _reseal(reason="k1 leaked in a ticket") -> str:
    out = io.StringIO()
    call_command("reseal_audit_heads", "--reason", reason, stdout=out)
    return out.getvalue()


@pytest.fixture
def sealed_with_the_old_key(settings):
    settings.AUDIT_SEAL_KEYS = {OLD: RING[OLD]}
    runs = [new_run(order=f"o-{i}") for i in range(3)]
    executor.advance_run(runs[0].pk, worker="w1")
    record_access_change(action=AccessAction.API_TOKEN_CREATED, subject="token a",
                         actor=Actor.system("test"), before={}, after={})
    settings.AUDIT_SEAL_KEYS = RING  # rotated: the new key signs, the old still verifies
    return runs


def test_every_head_is_sealed_again_and_the_old_key_can_go(settings, sealed_with_the_old_key):
    runs = sealed_with_the_old_key
    said = _reseal()
    assert f"sealed {len(runs)} run head(s) again with key '{NEW}'" in said
    assert "and the access chain head" in said
    assert all(Run.objects.get(pk=r.pk).audit_seal.startswith(f"{NEW}:") for r in runs)

    settings.AUDIT_SEAL_KEYS = {NEW: RING[NEW]}  # the old key removed from the ring
    call_command("verify_audit", stdout=io.StringIO())
    kept = AccessRecord.objects.get(action=AccessAction.AUDIT_HEADS_RESEALED)
    assert kept.reason == "k1 leaked in a ticket"
    assert kept.after == {"key_id": NEW, "run_heads": len(runs), "access_head": True}
    # A second pass finds nothing left to seal again.
    assert f"sealed 0 run head(s) again with key '{NEW}' ({len(runs)} were sealed" in _reseal()


def test_a_chain_that_does_not_verify_leaves_every_head_as_it_was(sealed_with_the_old_key):
    runs = sealed_with_the_old_key
    Run.objects.filter(pk=runs[1].pk).update(audit_head="f" * 64)  # its head forged
    seals = {r.pk: Run.objects.get(pk=r.pk).audit_seal for r in runs}
    with pytest.raises(CommandError, match=f"nothing was sealed again: audit chain of run "
                                           f"{runs[1].pk}"):
        _reseal()
    assert {r.pk: Run.objects.get(pk=r.pk).audit_seal for r in runs} == seals
    assert not AccessRecord.objects.filter(action=AccessAction.AUDIT_HEADS_RESEALED).exists()


@pytest.mark.parametrize("reason, problem", [
    ("   ", "--reason is empty"), ("bad\x1b[31m", "--reason: ")])
def test_a_reason_that_cannot_be_kept_is_refused_before_anything(sealed_with_the_old_key,
                                                                  reason, problem):
    runs = sealed_with_the_old_key
    with pytest.raises(CommandError, match=problem.replace("[", r"\[")):
        _reseal(reason)
    assert all(Run.objects.get(pk=r.pk).audit_seal.startswith(f"{OLD}:") for r in runs)
