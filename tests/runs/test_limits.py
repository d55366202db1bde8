"""Limits that protect receivers, enforced by the runtime: a rate per remote system shared
by every worker (no second above the limit, no 429), Retry-After honoured by all, at most N
runs in flight per workflow, and one run per concurrency key at a time, with real workers."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings

from runs.execution import sweeper
from runs.machine import limits, transitions
from runs.models import Run, RunStatus
from tests.factories import SYSTEM, new_run
from tests.processes import kill_hard, manage, start_worker, wait_for


class LimitedReceiver:
    """Answers 429 (Retry-After: 1) to a request that would make more than `per_second`
    in the last second; /vendor requests take `hold` seconds, recorded with their vendor."""

    def __init__(self, per_second=5, hold=0.15):
        self.arrivals: list[float] = []
        self.rejected = 0
        self.vendor_calls: list[tuple[str, str, float, float]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                start = time.monotonic()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status = 200
                if self.path.startswith("/rated"):
                    with receiver.lock:
                        recent = [t for t in receiver.arrivals if t > start - 1.0]
                        if len(recent) >= per_second:
                            receiver.rejected += 1
                            status = 429
                        receiver.arrivals.append(start)
                else:
                    time.sleep(hold)
                    with receiver.lock:
                        receiver.vendor_calls.append((body["vendor"], body["order"], start,
                                                      time.monotonic()))
                out = json.dumps({"id": f"R-{body['order']}"}).encode()
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "1")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def busiest_second(self) -> int:
        times = sorted(self.arrivals)
        return max((sum(1 for u in times[i:] if u < t + 1.0) for i, t in enumerate(times)),
                   default=0)


@pytest.fixture
def receiver():
    server = LimitedReceiver()
    yield server
    server.server.shutdown()


@pytest.fixture
def workers(tmp_path, receiver, empty_broker):
    # The empty broker: no stale hints or rate windows.
    procs = [start_worker(f"limits{i}", tmp_path, TEST_LIMITED_RECEIVER_URL=receiver.url,
                          RUNS_LIMITS_REDIS_URL=settings.CELERY_BROKER_URL)
             for i in range(2)]
    yield procs
    for proc in procs:
        kill_hard(proc)


def all_completed(ids: list[int], timeout: float):
    def done():
        sweeper.sweep()
        return Run.objects.filter(pk__in=ids, status=RunStatus.COMPLETED).count() == len(ids)

    wait_for(done, timeout=timeout, interval=0.5, what=f"{len(ids)} runs to complete")


@pytest.mark.django_db(transaction=True)
def test_a_hundred_runs_never_send_more_than_five_a_second_and_meet_no_429(receiver,
                                                                           workers):
    # Twenty seconds of two workers pressing on the limit: twenty of its windows.
    ids = [transitions.start_run(workflow="test-rated", business_key=f"rated-{i}",
                                 input={"order": f"o{i}"}, actor=SYSTEM)[0].pk
           for i in range(100)]
    all_completed(ids, timeout=200)
    assert receiver.rejected == 0
    assert receiver.busiest_second() <= 5
    assert len(receiver.arrivals) == 100           # one call per run: nothing was refused
    # ... and the limit was the pace, not a slow machine: about 5 a second.
    span = max(receiver.arrivals) - min(receiver.arrivals)
    assert span >= 99 / 5 * 0.95


@pytest.mark.django_db(transaction=True)
def test_with_a_concurrency_key_two_runs_of_one_vendor_never_run_at_once(receiver, workers):
    ids = [transitions.start_run(workflow="test-vendors", business_key=f"v-{i}",
                                 input={"order": f"o{i}", "vendor": ("acme", "globex")[i % 2]},
                                 actor=SYSTEM)[0].pk for i in range(12)]
    all_completed(ids, timeout=120)
    calls = receiver.vendor_calls
    assert len(calls) == 24                        # two steps per run
    for vendor in ("acme", "globex"):
        mine = sorted((c for c in calls if c[0] == vendor), key=lambda c: c[2])
        # Each run's two calls come one after the other: no other run of the vendor between.
        orders = [c[1] for c in mine]
        assert all(orders[i] == orders[i + 1] for i in range(0, len(orders), 2)), orders
        for earlier, later in zip(mine, mine[1:], strict=False):
            assert later[2] >= earlier[3] - 0.01, f"{vendor}: two calls overlapped"


@pytest.mark.django_db
def test_max_in_flight_refuses_a_claim_until_a_held_run_lets_go(script):
    limits.limit_workflow("test-orders", max_in_flight=1)
    try:
        first, second = new_run(), new_run()
        lease = transitions.claim_run(first.pk, worker="w1")
        assert lease is not None
        assert transitions.claim_run(second.pk, worker="w2") is None
        assert Run.objects.get(pk=second.pk).status == RunStatus.QUEUED
        transitions.terminate(first.pk, actor=SYSTEM, reason="make room")
        assert transitions.claim_run(second.pk, worker="w2") is not None
    finally:
        limits.forget(workflow="test-orders")


@pytest.mark.django_db
def test_a_concurrency_key_admits_other_vendors(script):
    first = transitions.start_run(workflow="test-vendors", business_key="k1",
                                  input={"order": "1", "vendor": "acme"}, actor=SYSTEM)[0]
    same = transitions.start_run(workflow="test-vendors", business_key="k2",
                                 input={"order": "2", "vendor": "acme"}, actor=SYSTEM)[0]
    other = transitions.start_run(workflow="test-vendors", business_key="k3",
                                  input={"order": "3", "vendor": "globex"}, actor=SYSTEM)[0]
    assert transitions.claim_run(first.pk, worker="w1") is not None
    assert transitions.claim_run(same.pk, worker="w2") is None
    assert transitions.claim_run(other.pk, worker="w2") is not None


def test_a_retry_after_blocks_the_system_for_every_caller():
    limits.rate_limit("blocked-system", per_second=100)
    try:
        assert limits.wait_for_turn("blocked-system") == 0
        limits.honour_retry_after("blocked-system", 0.6)
        started = time.monotonic()
        limits.wait_for_turn("blocked-system")
        assert time.monotonic() - started >= 0.5
    finally:
        limits.forget(system="blocked-system")


def test_a_retry_after_given_to_another_process_holds_this_one():
    """The block lives in Redis, beside the rate's window: a worker process that met a 429
    holds every other process (here a management shell, then this test's process)."""
    limits.rate_limit("blocked-elsewhere", per_second=100)
    try:
        blocker = manage("shell", "-c",
                         "from runs.machine import limits; "
                         "limits.rate_limit('blocked-elsewhere', per_second=100); "
                         "limits.honour_retry_after('blocked-elsewhere', 5.0)")
        _, err = blocker.communicate(timeout=60)
        assert blocker.returncode == 0, err
        waited = limits.wait_for_turn("blocked-elsewhere")
        # The rest of the other process's 5 s block, less the time it took to exit.
        assert waited >= 2.0
    finally:
        limits.forget(system="blocked-elsewhere")


@pytest.mark.django_db
def test_when_a_slot_frees_higher_priority_workflows_go_first(script):
    limits.limit_workflow("test-orders", max_in_flight=1, priority=1)
    limits.limit_workflow("test-remote", max_in_flight=1, priority=9)
    try:
        low = [new_run().pk for _ in range(2)]
        high = new_run("test-remote").pk
        assert limits.queued_by_priority(3) == [high, *low]
    finally:
        limits.forget(workflow="test-orders")
        limits.forget(workflow="test-remote")
