"""PostgreSQL goes away under a running fleet (a restart, a failover, the network to it): every
session of the worker dies at once and new ones are refused for a while. A run started
during the outage has its wake-up hint spent on a worker that cannot reach the database;
once the database answers again, beat's passes (the sweeper, the webhook publisher) carry on
by themselves: the run completes, each progress event reaches its subscriber once, and
neither the worker nor beat had to be restarted (a real worker and a real beat, their
database behind a TCP forwarder of this test's that drops every connection at once)."""

import json
import time
from collections import Counter

import pytest
from django.db import connection

from api.models import WebhookSubscriber
from audit.chain import Actor
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus
from tests.api.test_webhooks import Receiver
from tests.cuttable_proxy import cuttable_proxy
from tests.processes import child_env, start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
STARTER = Actor.system("outage-test")
OUTAGE = 6  # seconds: several of beat's ticks fail in it
BEAT_PASSES = ("runs.sweep", "runs.fire_schedules", "approvals.sweep", "api.publish_webhooks")
PASSES = {"SWEEP_INTERVAL_SECONDS": 1, "WEBHOOK_PUBLISH_INTERVAL_SECONDS": 1,
          "SCHEDULES_INTERVAL_SECONDS": 1, "APPROVALS_SWEEP_INTERVAL_SECONDS": 1}


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture
def database_behind_a_cuttable_link():
    db = connection.settings_dict
    with cuttable_proxy(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)) as proxy:
        yield proxy, f"postgres://{db['USER']}@127.0.0.1:{proxy.port}/{db['NAME']}"


def start_beat(log_dir, **env):
    import subprocess
    import sys

    from tests.processes import ROOT

    log = open(log_dir / "beat.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "console", "beat", "--loglevel=INFO",
         "-s", str(log_dir / "beat-schedule")],
        cwd=ROOT, env=child_env(**env), stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)


def _order(key: str) -> Run:
    return start_run(workflow="test-orders", business_key=key, input={"order": key},
                     actor=STARTER)[0]


def _completed(*runs) -> bool:
    return Run.objects.filter(pk__in=[r.pk for r in runs],
                              status=RunStatus.COMPLETED).count() == len(runs)


def _completions(receiver) -> Counter:
    told = Counter()
    for _, body in receiver.requests:
        event = json.loads(body)
        if event["type"] == "run.status_changed" and event["to"] == RunStatus.COMPLETED:
            told[event["run"]["id"]] += 1
    return told


def test_a_run_started_while_the_database_is_away_completes_after_it_by_beats_passes_alone(
        tmp_path, receiver, database_behind_a_cuttable_link):
    proxy, database_url = database_behind_a_cuttable_link
    WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret="k")
    env = {"DATABASE_URL": database_url, "VAR_DIR": tmp_path, **PASSES}
    worker = start_worker("outage", tmp_path, **env)
    beat = start_beat(tmp_path, **env)
    try:
        before = _order("before-outage")
        wait_for(lambda: _completed(before), timeout=120, what="the first run to complete")

        proxy.cut()
        during = _order("during-outage")
        time.sleep(OUTAGE)
        assert proxy.connections_refused >= 1, "nothing tried the database during the outage"
        assert Run.objects.get(pk=during.pk).status == RunStatus.QUEUED
        assert worker.poll() is None and beat.poll() is None
        proxy.restore()

        # Nobody sweeps by hand here: beat's passes alone bring the run and its events.
        wait_for(lambda: _completed(during), timeout=180, interval=0.2,
                 what="the run started during the outage to complete")
        wait_for(lambda: set(_completions(receiver)) >= {before.pk, during.pk}, timeout=90,
                 interval=0.2, what="both completions to reach the subscriber")
        time.sleep(3)  # a few more publisher passes: nothing is told twice
        assert worker.poll() is None and beat.poll() is None
    finally:
        stop(beat)
        stop(worker)
    # This test's runs (a schedule beat fires meanwhile may complete a run of its own).
    told = _completions(receiver)
    assert {pk: told[pk] for pk in (before.pk, during.pk)} == {before.pk: 1, during.pk: 1}
    assert "Traceback" not in (tmp_path / "beat.log").read_text()

    # Said in one line when it began and one when it ended, by each pass: not a traceback
    # at every tick (Celery's default for a task that raises).
    log = (tmp_path / "outage.log").read_text()
    assert "Traceback" not in log and "raised unexpected" not in log
    for name in BEAT_PASSES:
        assert log.count(f"{name}: the database cannot be reached") == 1, name
        assert log.count(f"{name}: the database answers again") == 1, name
