"""A real HTTP receiver on localhost that misbehaves on purpose, chosen by the first part of
the path it is sent to:

- /slow-headers: a status line, then its headers a byte every `drip` seconds;
- /slow-body: every header, then the body a byte every `drip` seconds;
- /endless-body: every header, then a body that never ends (64 KiB every 10 ms);
- /silent: reads the request and never answers.

Each connection is held at most `hold` seconds, so a client that never gives up still lets
the test end; it ends sooner when the client hangs up. Every request is recorded with what
was sent and whether the client hung up before `hold` ran out."""

import select
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = b"x" * 65536


@dataclass
class Exchange:
    mode: str
    started: float
    ended: float | None = None
    bytes_sent: int = 0
    client_hung_up: bool = False


class SlowReceiver:
    def __init__(self, *, drip: float = 0.5, hold: float = 5.0):
        self.drip, self.hold = drip, hold
        self.exchanges: list[Exchange] = []
        self.stopping = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                exchange = Exchange(mode=self.path.strip("/").split("/")[0],
                                    started=time.monotonic())
                receiver.exchanges.append(exchange)
                try:
                    receiver.misbehave(self.connection, exchange)
                except (BrokenPipeError, ConnectionResetError):
                    exchange.client_hung_up = True
                exchange.ended = time.monotonic()
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def misbehave(self, conn: socket.socket, exchange: Exchange) -> None:
        def send(data: bytes) -> None:
            conn.sendall(data)
            exchange.bytes_sent += len(data)

        if exchange.mode == "silent":
            self.wait_for_hang_up(conn, exchange)
            return
        if exchange.mode == "slow-headers":
            send(b"HTTP/1.1 200 OK\r\n")
            self.drip_forever(send, b"X-Slow: " + b"y" * 10_000)
        elif exchange.mode == "slow-body":
            send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
            self.drip_forever(send, b"y" * 1_000_000)
        elif exchange.mode == "endless-body":
            send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n"
            deadline = time.monotonic() + self.hold
            while time.monotonic() < deadline and not self.stopping.is_set():
                send(chunk)
                time.sleep(0.01)

    def drip_forever(self, send, data: bytes) -> None:
        deadline = time.monotonic() + self.hold
        for byte in data:
            if time.monotonic() >= deadline or self.stopping.wait(self.drip):
                return
            send(bytes([byte]))

    def wait_for_hang_up(self, conn: socket.socket, exchange: Exchange) -> None:
        deadline = time.monotonic() + self.hold
        while time.monotonic() < deadline and not self.stopping.is_set():
            readable, _, _ = select.select([conn], [], [], 0.05)
            if readable and not conn.recv(1, socket.MSG_PEEK):
                exchange.client_hung_up = True
                return

    def requests(self, mode: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.mode == mode]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
