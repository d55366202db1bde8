"""The database server's clock, for every time a lease or a due time is judged by.

Workers' clocks drift and can be wrong by minutes; the database is one clock all workers
share. Statements that judge a lease (expiry, heartbeat) use the server's now() inside the
statement. Times a transition stamps in Python (a claim's lease, the next attempt, audit
times) come from `now()` here: this process's clock corrected by its measured offset from the
server's, measured again every REMEASURE_SECONDS so a worker whose clock jumps is corrected
within that time, at the cost of one short query per interval, not one per transition.
"""

import threading
import time
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

REMEASURE_SECONDS = 30.0

_lock = threading.Lock()
_offset: timedelta | None = None
_measured_at = 0.0


def now() -> datetime:
    """The database server's current time, as this process best knows it."""
    global _offset, _measured_at
    if connection.vendor != "postgresql":
        # The embedded SQLite database lives in this process: its clock is this one.
        return timezone.now()
    if _offset is None or time.monotonic() - _measured_at > REMEASURE_SECONDS:
        with _lock:
            before = timezone.now()
            with connection.cursor() as cursor:
                cursor.execute("SELECT clock_timestamp()")
                server = cursor.fetchone()[0]
            after = timezone.now()
            _offset = server - (before + (after - before) / 2)
            _measured_at = time.monotonic()
    return timezone.now() + _offset


def forget() -> None:
    """Measure again at the next call (tests that move the process's clock)."""
    global _offset
    _offset = None
