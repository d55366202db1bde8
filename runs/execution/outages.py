"""Troubles that last (the database away, a shared store that does not answer): said once
when they begin and once when they end, per process, never at every attempt between. An
outage met by every pass or every request would otherwise write a line (or a traceback) each
time, and bury the line that says what is wrong."""

import threading


class Outages:
    """Which named troubles this process meets, and how many times in a row."""

    def __init__(self):
        self.lock = threading.Lock()
        self.failed: dict[str, int] = {}

    def failed_once_more(self, name: str) -> int:
        """Count one more failure of `name`; 1 means it has just begun: say so."""
        with self.lock:
            self.failed[name] = self.failed.get(name, 0) + 1
            return self.failed[name]

    def answered(self, name: str) -> int:
        """`name` worked: how many failures in a row it ended (0: there was no trouble)."""
        if name not in self.failed:  # the common case, without the lock
            return 0
        with self.lock:
            return self.failed.pop(name, 0)


outages = Outages()
