"""The threads mode's lease heartbeat (runs.machine.heartbeats) meets a database that refuses
writes (default_transaction_read_only, a standby after a failover) while a step's call is under
way: it says so in one line, once, and once more when a beat goes through again, as the beat
passes and the worker registry's heartbeat do (runs.store.read_only). Before, it logged a
traceback at every beat (several a second), burying every other line. A real worker in the
threads mode; the database is read-only for new sessions, as each beat opens one."""

import time

import pytest
from django.db import connection

from audit.chain import Actor
from runs.bench_receiver import SlowReceiver
from runs.machine.transitions import start_run
from runs.models import RunStatus
from tests.processes import start_worker, stop, until_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]

REFUSED = "lease heartbeat: the database refuses writes"
ACCEPTED = "lease heartbeat: the database accepts writes again"


def _read_only(on: bool) -> None:
    name = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        if on:
            cursor.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        else:
            cursor.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')


def test_a_heartbeat_refused_writes_says_it_once_and_once_when_they_go_through(tmp_path):
    with SlowReceiver(delay=8) as receiver:
        worker = start_worker("beats", tmp_path, pool="threads", concurrency=2,
                              VAR_DIR=tmp_path, RUNS_HEARTBEAT_SECONDS=0.3)
        log = tmp_path / "beats.log"
        try:
            run = start_run(workflow="test-two-remote-calls", business_key="beats",
                            input={"n": 1, "url": receiver.url},
                            actor=Actor.system("heartbeat-test"))[0]
            wait_for(lambda: receiver.held, timeout=60, interval=0.05,
                     what="the first call to reach the receiver")
            try:
                _read_only(True)
                wait_for(lambda: "lease heartbeat" in log.read_text(), timeout=30,
                         what="the heartbeat to meet the refusal")
                time.sleep(1.5)  # several beats more meet it while the call is under way
                assert receiver.held
            finally:
                _read_only(False)
            wait_for(lambda: ACCEPTED in log.read_text(), timeout=30,
                     what="a beat to go through again")
            until_status(run, RunStatus.COMPLETED, timeout=90)
        finally:
            stop(worker)
        assert sorted(receiver.posts.values()) == [1, 1]

    said = log.read_text()
    assert said.count(REFUSED) == 1
    assert said.count(ACCEPTED) == 1
    assert "Traceback" not in said and "lease heartbeat failed" not in said
