"""A TCP forwarder on localhost whose link can be cut and restored, for the tests about a
network between a worker and its broker that breaks: `cut()` drops every open connection at
once (as a switch or a firewall losing its state would) and drops each new one as it comes,
until `restore()`."""

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
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket):
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        _drop(source)
        _drop(target)

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
