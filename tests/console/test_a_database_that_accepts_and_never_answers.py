"""A database that accepts connections and never answers (hung, a failover under way, a
dead proxy) fails a process's work within the connect timeout, saying so, instead of holding
it forever: libpq waits without limit unless told (a real process, against a listener of this
test's that never says a word)."""

import time

from django.conf import settings

from tests.processes import manage
from tests.silent_listener import silent_listener


def test_a_command_against_a_silent_database_fails_within_the_connect_timeout():
    with silent_listener() as port:
        began = time.monotonic()
        starting = manage("start_run", "test-orders", "silent-database", "--input",
                          '{"order": "o"}',
                          DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/nowhere")
        try:
            _, err = starting.communicate(timeout=40)
        finally:
            if starting.poll() is None:
                starting.kill()
                starting.communicate()
        took = time.monotonic() - began
    assert starting.returncode != 0
    assert "connection timeout expired" in err
    # The connect timeout, and the process's own start-up.
    assert took < settings.DB_CONNECT_TIMEOUT + 15, f"took {took:.1f}s"
