"""Deliver event (event_received) takes the event's payload, as JSON text, in `evidence`.
The API holds it to the rule the console and the CLI hold it to, an event's
(RUNS_INPUT_MAX_BYTES as compact JSON, runs.waiting.events), not to the length of a person's
text (PERSON_TEXT_MAX), which the schema once applied to `evidence` for every action: a
payload of a few kilobytes was refused over the API and delivered from the console. Above
the limit it is refused with 422 naming `evidence`, on both paths in the same words, and
nothing is written. Evidence a person writes for reconcile keeps its own limit: one
character over PERSON_TEXT_MAX is still 422 naming `evidence`."""

import json

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.machine.storable import PERSON_TEXT_MAX
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from tests.factories import new_run, place, step

pytestmark = pytest.mark.django_db

LIMIT = 4 * PERSON_TEXT_MAX
OVER_THE_LIMIT = "over the limit of 8,000 bytes (RUNS_INPUT_MAX_BYTES); nothing was delivered"


@pytest.fixture(autouse=True)
def _input_limit(settings):
    settings.RUNS_INPUT_MAX_BYTES = LIMIT


@pytest.fixture
def olga(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


@pytest.fixture
def waiting_run(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return Run.objects.get(pk=run.pk)


def _bearer(person, workflow):
    _, plaintext = token_create(name="ops", workflows=[workflow], acting_user=person)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _deliver(client, person, run, evidence: str):
    return client.post(f"/api/runs/{run.pk}/actions/event_received",
                       {"reason": "psp confirmed by phone", "evidence": evidence},
                       content_type="application/json",
                       **_bearer(person, "test-payment-wait"))


def _paid(size: int) -> dict:
    """A payment whose payload is `size` bytes as compact JSON."""
    base = {"amount": 5, "reference": ""}
    return {**base, "reference": "r" * (size - len(json.dumps(base, separators=(",", ":"))))}


def _written(run):
    run = Run.objects.get(pk=run.pk)
    return (run.status, run.audit_seq, step(run, "payment").status,
            AuditRecord.objects.filter(run=run).count(), ExternalEvent.objects.count())


def test_a_payload_longer_than_a_persons_text_is_delivered_over_the_api(client, olga,
                                                                        waiting_run):
    payload = _paid(LIMIT)
    response = _deliver(client, olga, waiting_run, json.dumps(payload))
    assert response.status_code == 200, response.content
    assert step(waiting_run, "payment").status == StepStatus.SUCCEEDED
    assert step(waiting_run, "payment").result == payload


def test_the_limit_is_the_payloads_as_compact_json_not_the_length_of_its_text(
        client, olga, waiting_run):
    written = json.dumps(_paid(LIMIT), indent=4)
    assert len(written) > LIMIT
    response = _deliver(client, olga, waiting_run, written)
    assert response.status_code == 200, response.content
    assert step(waiting_run, "payment").status == StepStatus.SUCCEEDED


def test_a_payload_over_the_limit_is_422_naming_evidence_and_nothing_is_delivered(
        client, olga, waiting_run):
    before = _written(waiting_run)
    response = _deliver(client, olga, waiting_run, json.dumps(_paid(LIMIT + 1)))
    assert response.status_code == 422, response.content
    answer = response.json()
    assert [e["loc"] for e in answer["errors"]] == [["evidence"]]
    assert OVER_THE_LIMIT in answer["detail"]
    assert _written(waiting_run) == before
    assert Run.objects.get(pk=waiting_run.pk).status == RunStatus.WAITING


def test_the_console_refuses_the_same_payload_in_the_same_words(client, olga, waiting_run):
    before = _written(waiting_run)
    client.force_login(olga)
    response = client.post(f"/runs/{waiting_run.pk}/event_received/",
                           {"reason": "psp confirmed by phone",
                            "evidence": json.dumps(_paid(LIMIT + 1)),
                            "seen": waiting_run.audit_seq}, follow=True)
    assert OVER_THE_LIMIT in response.content.decode()
    assert _written(waiting_run) == before


@pytest.mark.parametrize("evidence", ["", "x" * (PERSON_TEXT_MAX + 1)],
                         ids=["missing", "over_a_persons_text"])
def test_reconcile_evidence_missing_or_over_a_persons_text_is_422_naming_evidence(
        client, olga, evidence):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.UNKNOWN})
    before = (Run.objects.values_list("status", "audit_seq").get(pk=run.pk),
              step(run, "create-task").status, AuditRecord.objects.filter(run=run).count())
    response = client.post(f"/api/runs/{run.pk}/actions/reconcile",
                           {"reason": "checked the tracker", "step": "create-task",
                            "mode": "not_found", "evidence": evidence},
                           content_type="application/json", **_bearer(olga, "test-orders"))
    assert response.status_code == 422, response.content
    answer = response.json()
    assert [e["loc"] for e in answer["errors"]] == [["evidence"]]
    assert (f"{PERSON_TEXT_MAX + 1:,} characters, at most {PERSON_TEXT_MAX:,}" if evidence
            else "needs the evidence") in answer["detail"]
    assert (Run.objects.values_list("status", "audit_seq").get(pk=run.pk),
            step(run, "create-task").status,
            AuditRecord.objects.filter(run=run).count()) == before
