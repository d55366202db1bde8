"""POST /api/bulk with a start_key is safe to send again: a client retrying after a timeout,
or sending the same start from several processes at once, gets the one job that key
started, never a second job acting on the same runs."""

import threading

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test import Client

from api.tokens import token_create
from approvals.models import BulkJob
from console.roles import ensure_roles
from runs.models import RunStatus
from tests.factories import new_run, place

START = {"action": "terminate", "reason": "the tenant left",
         "filters": {"workflow": "test-orders", "status": "attention"},
         "start_key": "erp-cleanup-2024-06-01"}


def bearer_for_an_operator() -> dict:
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=olga)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def start(client, headers, body=START):
    return client.post("/api/bulk", body, content_type="application/json", **headers)


@pytest.mark.django_db
def test_the_start_sent_again_answers_the_job_it_started(
        client, django_capture_on_commit_callbacks):
    headers = bearer_for_an_operator()
    for _ in range(2):
        place(new_run(), status=RunStatus.ATTENTION)

    with django_capture_on_commit_callbacks() as hints:
        first = start(client, headers)
        again = start(client, headers)

    assert first.status_code == 202, first.content
    assert again.status_code == 200, again.content
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["total"] == first.json()["total"] == 2
    assert BulkJob.objects.count() == 1
    assert len(hints) == 1  # one worker woken, for the one job


@pytest.mark.django_db(transaction=True)
def test_the_same_start_sent_at_once_from_several_clients_makes_one_job():
    headers = bearer_for_an_operator()
    place(new_run(), status=RunStatus.ATTENTION)
    barrier = threading.Barrier(4)
    answers = []

    def send():
        try:
            barrier.wait(timeout=10)
            answers.append(start(Client(), headers))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(a.status_code for a in answers) == [200, 200, 200, 202], \
        [a.content for a in answers]
    assert len({a.json()["id"] for a in answers}) == 1
    assert BulkJob.objects.count() == 1
