"""The threaded development server (runserver, what `make demo` runs) on PostgreSQL holds a
bounded number of database connections, however many request threads it has served."""

import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.processes import ROOT, child_env, stop, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                       "AND pid <> pg_backend_pid()", [connection.settings_dict["NAME"]])
        return cursor.fetchone()[0]


def test_120_requests_through_runserver_leave_a_handful_of_connections(client, operator,
                                                                        tmp_path):
    client.force_login(operator)
    cookie = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    port = free_port()
    env = child_env()
    env.pop("DB_CONN_MAX_AGE", None)
    log = open(tmp_path / "web.log", "w")  # noqa: SIM115 - closed after the server stops
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "runserver", f"127.0.0.1:{port}",
         "--noreload"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _up(base), timeout=60, what="runserver up")
        before = server_connections()

        def get(_):
            # A page that reads the session, the user and the runs from the database.
            return httpx.get(f"{base}/runs/", cookies=cookie, timeout=30).status_code

        with ThreadPoolExecutor(max_workers=8) as pool:
            codes = list(pool.map(get, range(120)))
        assert codes == [200] * 120
        held = server_connections()
    finally:
        stop(server)
        server.wait(timeout=20)
        log.close()
    assert held - before <= 3, f"runserver holds {held - before} connections after 120 requests"


def _up(base: str) -> bool:
    try:
        return httpx.get(f"{base}/accounts/login/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
