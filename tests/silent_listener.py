"""A TCP listener that takes every connection and never sends a byte: a broker or a database
that hangs, fails over, or sits behind a half-open connection (tests of the seams)."""

import contextlib
import socket
import threading
from collections.abc import Iterator

PORTS = range(8742, 8750)  # the ports these probes may use on this machine


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """Listens on a free port of PORTS (yielded) until the block ends."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    for port in PORTS:
        with contextlib.suppress(OSError):
            server.bind(("127.0.0.1", port))
            break
    else:
        server.close()
        raise RuntimeError(f"no free port in {PORTS}")
    server.listen(64)
    server.settimeout(0.2)
    held, stopping = [], threading.Event()

    def accept():
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stopping.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
