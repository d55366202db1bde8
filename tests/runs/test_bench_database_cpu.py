"""make bench's database CPU per step counts every backend that served the runs, one that
ended within the round (the worker reconnects every CELERY_DB_REUSE_MAX tasks) with all it
spent: read only at the round's two ends, it counted nothing of such a backend."""

import time

import psycopg
import pytest
from django.db import connection

from runs.bench_processes import BackendsCpu, proc_cpu_seconds

pytestmark = pytest.mark.django_db(transaction=True)


def _worker_connection() -> psycopg.Connection:
    params = connection.get_connection_params()
    return psycopg.connect(**{k: v for k, v in params.items() if k != "cursor_factory"},
                           application_name="bench-worker", autocommit=True)


def test_a_backend_that_ends_within_the_window_counts_with_what_it_spent(monkeypatch):
    monkeypatch.setattr(BackendsCpu, "LIST_SECONDS", 0.0)
    window = BackendsCpu()
    worker = _worker_connection()
    pid = worker.info.backend_pid
    window.sample()  # lists it
    worker.execute("SELECT count(*) FROM generate_series(1, 3000000)")
    window.sample()
    spent = proc_cpu_seconds(pid)
    assert spent > 0.05
    worker.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            proc_cpu_seconds(pid)
        except OSError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"backend {pid} did not end")
    assert window.seconds() >= spent
