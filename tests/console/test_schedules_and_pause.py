"""The operator's surface of schedules and of pausing a workflow's dispatch: the schedules
page, the banner on each page of a paused workflow, pausing from the console, the API and
the CLI (each permission-checked, recorded with who and why), and the metrics."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from api.tokens import token_create
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, Run, ScheduleState
from runs.waiting import schedules
from tests.factories import SYSTEM, new_run

pytestmark = pytest.mark.django_db

BANNER = "Dispatch of <strong>test-orders</strong>"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def test_the_schedules_page_lists_next_fire_times_and_last_runs(client, operator):
    now = timezone.now()
    schedules.fire_schedule(schedules.registry.get("test-scheduled", "every-minute"),
                            now=now - timedelta(minutes=3))
    report = schedules.fire_schedule(schedules.registry.get("test-scheduled", "every-minute"),
                                     now=now)
    assert len(report.started) == 3
    client.force_login(operator)
    page = client.get("/schedules/").content.decode()
    assert "every-minute" in page and "every 0:01:00" in page
    for run in Run.objects.filter(pk__in=report.started):
        assert f"/runs/{run.pk}/" in page and run.business_key in page
    next_slot = schedules.registry.get("test-scheduled", "every-minute").next_slots(now, 1)[0]
    assert next_slot.strftime("%Y-%m-%d %H:%M") in page
    # Pausing is a POST with a reason, refused without one.
    url = "/schedules/test-scheduled/every-minute/pause/"
    client.post(url, {"paused": "1", "reason": ""})
    assert not ScheduleState.objects.get(name="every-minute").paused
    client.post(url, {"paused": "1", "reason": "month-end freeze"})
    state = ScheduleState.objects.get(name="every-minute")
    assert state.paused and state.paused_by == "olga"
    assert "month-end freeze" in client.get("/schedules/").content.decode()
    assert client.get(url).status_code == 405


def test_who_may_not_pause_cannot_and_nothing_changes(client, auditor):
    client.force_login(auditor)
    assert client.post("/schedules/test-scheduled/every-minute/pause/",
                       {"paused": "1", "reason": "x"}).status_code == 403
    assert client.post("/workflows/test-orders/dispatch/",
                       {"paused": "1", "reason": "x"}).status_code == 403
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()
    assert "Pause dispatch" not in client.get("/workflows/test-orders/").content.decode()


def test_a_paused_workflow_shows_a_banner_on_each_of_its_pages(client, operator):
    run = new_run()
    other = new_run("test-two-systems")
    client.force_login(operator)
    assert "Pause dispatch" in client.get("/workflows/test-orders/").content.decode()
    client.post("/workflows/test-orders/dispatch/", {"paused": "1", "reason": "INC-9 ledger"})
    assert DispatchPause.objects.get().paused_by == "olga"
    for url in (f"/runs/{run.pk}/", "/workflows/test-orders/", "/runs/?workflow=test-orders"):
        page = client.get(url).content.decode()
        assert BANNER in page and "INC-9 ledger" in page, url
    assert BANNER not in client.get(f"/runs/{other.pk}/").content.decode()
    client.post("/workflows/test-orders/dispatch/", {"paused": "0", "reason": "fixed"})
    assert BANNER not in client.get(f"/runs/{run.pk}/").content.decode()
    assert list(ControlRecord.objects.values_list("action", "actor_label", "reason")
                .order_by("id")) == [("dispatch_paused", "olga", "INC-9 ledger"),
                                     ("dispatch_resumed", "olga", "fixed")]


def test_the_api_pauses_and_resumes_for_a_token_whose_acting_user_may(client):
    boss = User.objects.create_superuser("boss")
    _, good = token_create(name="ops", workflows=["test-orders"], acting_user=boss)
    _, weak = token_create(name="erp", workflows=["test-orders"], created_by=boss,
                           acting_user=User.objects.create_user("clerk"))
    url = "/api/workflows/test-orders/dispatch"

    def post(path, body, token):
        return client.post(path, body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")

    assert post(f"{url}/pause", {"reason": "x"}, weak).status_code == 403
    assert post(f"{url}/pause", {"reason": ""}, good).status_code == 422
    assert post(f"{url}/pause", {"reason": "x", "system": "moon"}, good).status_code == 422
    assert post("/api/workflows/test-two-systems/dispatch/pause", {"reason": "x"},
                good).status_code == 404
    assert not DispatchPause.objects.exists()
    response = post(f"{url}/pause", {"reason": "INC-11"}, good)
    assert response.status_code == 200 and response.json()["paused"] is True
    assert post(f"{url}/pause", {"reason": "again"}, good).status_code == 409
    state = client.get(url, HTTP_AUTHORIZATION=f"Bearer {good}").json()
    assert state["pauses"][0]["reason"] == "INC-11"
    assert state["pauses"][0]["paused_by"] == "boss"
    assert post(f"{url}/resume", {"reason": "done"}, good).json()["paused"] is False
    assert ControlRecord.objects.filter(actor_label="boss", actor_user_id=boss.pk).count() == 2


def test_the_cli_pauses_lists_and_resumes_as_a_named_user(operator, auditor, capsys):
    with pytest.raises(CommandError, match="may not pause"):
        call_command("dispatch", "pause", "test-orders", "--user", "aude", "--reason", "x")
    with pytest.raises(CommandError, match="reason is required"):
        call_command("dispatch", "pause", "test-orders", "--user", "olga", "--reason", " ")
    call_command("dispatch", "pause", "test-two-systems", "--system", "ledger",
                 "--user", "olga", "--reason", "ledger down")
    call_command("dispatch", "status")
    assert "test-two-systems (ledger): paused by olga" in capsys.readouterr().out
    call_command("dispatch", "resume", "test-two-systems", "--system", "ledger",
                 "--user", "olga", "--reason", "ledger up")
    assert not DispatchPause.objects.exists()
    call_command("schedules", "pause", "test-scheduled", "every-minute", "--user", "olga",
                 "--reason", "freeze")
    call_command("schedules", "list", "--json")
    assert '"paused": true' in capsys.readouterr().out


def test_metrics_expose_paused_workflows_and_schedules(client):
    new_run()
    dispatch.pause_dispatch(workflow="test-orders", actor=SYSTEM, reason="x")
    schedules.set_paused(workflow="test-scheduled", name="every-minute", paused=True,
                         actor=SYSTEM, reason="y")
    body = client.get("/metrics").content.decode()
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for f in text_string_to_metric_families(body) for s in f.samples}
    assert samples[("durable_dispatch_paused",
                    frozenset({"workflow": "test-orders", "system": ""}.items()))] == 1
    assert samples[("durable_dispatch_paused",
                    frozenset({"workflow": "test-two-systems", "system": ""}.items()))] == 0
    assert samples[("durable_schedule_paused", frozenset(
        {"workflow": "test-scheduled", "schedule": "every-minute"}.items()))] == 1


def test_the_cli_says_when_nothing_is_paused_and_when_there_are_no_schedules(
        capsys, monkeypatch):
    # Silence would read as a command that did nothing.
    call_command("dispatch", "status")
    assert capsys.readouterr().out.strip() == (
        "no workflow or external system is paused: all dispatch")
    monkeypatch.setattr(schedules.registry, "all", lambda: [])  # no workflow declares one
    call_command("schedules", "list")
    assert capsys.readouterr().out.strip() == "no schedules: no workflow declares one"


def test_the_cli_list_says_a_paused_schedule_has_no_next_fire_time(operator, capsys):
    call_command("schedules", "pause", "test-scheduled", "every-minute", "--user", "olga",
                 "--reason", "freeze")
    capsys.readouterr()
    call_command("schedules", "list")
    line = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("test-scheduled every-minute "))
    assert line.endswith("] paused; next: none while paused")
    call_command("schedules", "resume", "test-scheduled", "every-minute", "--user", "olga",
                 "--reason", "thaw")
    capsys.readouterr()
    call_command("schedules", "list")
    line = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("test-scheduled every-minute "))
    assert "] running; next: " in line and "none while paused" not in line


@pytest.mark.parametrize("url, system, answered", [
    ("/workflows/test-two-systems/dispatch/", "x\x00", 302),  # refused, naming the field
    ("/workflows/test-orders/dispatch/", "\x00", 302),
    ("/workflows/a%00b/dispatch/", "", 404),  # no workflow has such a name
])
def test_a_resume_naming_what_the_database_cannot_hold_is_refused_not_a_server_error(
        client, operator, url, system, answered):
    client.force_login(operator)
    client.raise_request_exception = False
    response = client.post(url, {"paused": "0", "reason": "r", "system": system})
    assert response.status_code == answered, response.content[:300]
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()
