"""A TCP forwarder on localhost whose link can be cut and restored, for the tests about a
network between a worker and its broker that breaks: `cut()` drops every open connection at
once (as a switch or a firewall losing its state would) and drops each new one as it comes,
until `restore()`.

In front of PostgreSQL, `lose_next_commit` cuts the one connection that sends the next
COMMIT, either as it is sent (the server never sees it) or once the server has answered it
(the server committed; the answer never reaches the client)."""

import contextlib
import socket
import struct
import threading


class CuttableProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut_off = threading.Event()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        self.connections_cut = 0
        self.connections_refused = 0
        # lose_next_commit's aim, and the COMMITs it lost: "sent" (never reached the
        # server) or "answered" (committed, its answer lost).
        self.commit_to_lose: tuple[bool, bool, bool] | None = None
        self.commits_lost: list[str] = []
        # Every byte the clients sent, while not None (a test sets it to a bytearray).
        self.sent: bytearray | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.cut_off.is_set():
                self.connections_refused += 1
                _drop(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _drop(client)
                continue
            server.settimeout(None)
            with self.lock:
                self.open += [client, server]
            answer_to_lose = threading.Event()
            threading.Thread(target=self._pump, args=(client, server, answer_to_lose, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, answer_to_lose, False),
                             daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket,
              answer_to_lose: threading.Event, to_server: bool):
        try:
            while data := source.recv(65536):
                if not to_server and answer_to_lose.is_set():
                    # The server's answer to the COMMIT: the link goes before it is passed.
                    self._lost("answered", source, target)
                    return
                if to_server and self.commit_to_lose is not None and \
                        data.startswith(b"Q") and b"COMMIT\x00" in data:
                    reaches_server, stay_cut, server_told = self.commit_to_lose
                    self.commit_to_lose = None
                    if stay_cut:
                        self.cut_off.set()
                    if not reaches_server:
                        # Not told, the server's end stays open (a silent partition): its
                        # session waits in its transaction until it is ended there.
                        self._lost("sent", source, *([target] if server_told else []))
                        return
                    answer_to_lose.set()
                if to_server and self.sent is not None:
                    self.sent += data
                target.sendall(data)
        except OSError:
            pass
        _drop(source)
        _drop(target)

    def _lost(self, what: str, *sockets: socket.socket):
        self.commits_lost.append(what)
        self.connections_cut += 1
        for sock in sockets:
            _drop(sock)

    def lose_next_commit(self, *, reaches_server: bool, stay_cut: bool = False,
                         server_told: bool = True):
        """Cut the connection that sends the next COMMIT (a simple query: psycopg's
        commit): as it is sent, or (`reaches_server`) once the server has answered it. The
        other connections, and new ones, go on, unless `stay_cut`: then the link stays cut
        (as cut() leaves it) from that COMMIT on, until restore(). Cut as it is sent and
        not `server_told`, only the client's side is reset: the server's session stays
        open, in its transaction, as after a partition no packet crossed."""
        self.commit_to_lose = (reaches_server, stay_cut, server_told)

    def cut(self):
        self.cut_off.set()
        with self.lock:
            dropped, self.open = self.open, []
        self.connections_cut += len(dropped) // 2
        for sock in dropped:
            _drop(sock)

    def restore(self):
        self.cut_off.clear()

    def close(self):
        self.stopping.set()
        self.cut()
        self.listener.close()


def _drop(sock: socket.socket):
    # A reset, not a polite close: the peer learns of it only when it next reads or writes.
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # Shutting the reading side wakes this end's pump blocked in recv without a word to
    # the peer; the close then resets.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


@contextlib.contextmanager
def cuttable_proxy(host: str, port: int):
    proxy = CuttableProxy(host, port)
    try:
        yield proxy
    finally:
        proxy.close()


@contextlib.contextmanager
def database_behind_a_cuttable_link():
    """This process's connections to the test database go through a CuttableProxy, which
    is yielded; each is opened anew through it, and after the block anew without it."""
    from django.db import connection

    db = connection.settings_dict
    with cuttable_proxy(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)) as proxy:
        connection.close()
        host, port = db["HOST"], db["PORT"]
        db["HOST"], db["PORT"] = "127.0.0.1", proxy.port
        try:
            yield proxy
        finally:
            connection.close()
            db["HOST"], db["PORT"] = host, port
