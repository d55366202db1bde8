"""A remote system that answers after a fixed delay, for the in-flight measurements
(`manage.py bench_runtime`, tests/runs/test_in_flight.py): a real HTTP server on an
ephemeral localhost port that honours idempotency keys as a well-behaved receiver does.

POST /effects with an Idempotency-Key makes the effect when the request arrives (before the
delay: a caller killed while waiting has made it), and a second POST with the same key makes
none and answers with the first one's id. GET /effects/<key> looks an effect up by key (404
when there is none), at once. It counts the requests per key and the most held at once.
send_effect and look_up_effect are a step's call and its lookup by key against it.
"""

import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from pydantic import BaseModel

from .definitions.definition import Contract, Found, NotFound, StepDef, StepResult, Workflow

REMOTE_TIMEOUT_SECONDS = 10.0


class _Server(ThreadingHTTPServer):
    # Hundreds of callers connect at once: the default backlog of 5 would drop their SYNs
    # and make them retry a second later.
    request_queue_size = 2048
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a caller killed mid-request (the crash tests do it on purpose) is no news


class SlowReceiver:
    def __init__(self, delay: float = 1.0):
        self.delay = delay
        self.effects: dict[str, str] = {}  # key -> id
        self.posts: dict[str, int] = {}  # key -> POSTs received
        self.holding = 0
        self.held: dict[str, float] = {}  # key -> when its POST arrived, while it is held
        self.max_holding = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: a caller's pool reuses connections
            # Headers and body go out in two writes: with Nagle's algorithm the second waits
            # for the caller's delayed ACK, 40 ms added to every answer.
            disable_nagle_algorithm = True

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                key = self.headers.get("Idempotency-Key", "")
                if not key:
                    return self._send(400, {"error": "Idempotency-Key is required"})
                with receiver._lock:
                    receiver.posts[key] = receiver.posts.get(key, 0) + 1
                    ref = receiver.effects.setdefault(key, f"E-{len(receiver.effects) + 1}")
                    receiver.holding += 1
                    receiver.held[key] = time.monotonic()
                    receiver.max_holding = max(receiver.max_holding, receiver.holding)
                try:
                    time.sleep(receiver.delay)
                finally:
                    with receiver._lock:
                        receiver.holding -= 1
                        receiver.held.pop(key, None)
                self._send(200, {"id": ref})

            def do_GET(self):
                key = self.path.rstrip("/").rsplit("/", 1)[-1]
                with receiver._lock:
                    ref = receiver.effects.get(key)
                self._send(200, {"id": ref}) if ref else self._send(404, {"error": "not found"})

            def _send(self, status: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def arrived_within(self, seconds: float) -> set[str]:
        """The keys of the POSTs held now that arrived within the last `seconds`."""
        with self._lock:
            now = time.monotonic()
            return {key for key, at in self.held.items() if now - at < seconds}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class RemoteIn(BaseModel):
    n: int
    url: str  # the receiver's


_clients = threading.local()
# One TLS context for every thread's client: each would otherwise load the CA store itself
# (about half a megabyte a client, 500 clients in the threads mode).
_tls = ssl.create_default_context()


def _http() -> httpx.Client:
    """This thread's HTTP client. A client per call would build a connection pool each time;
    one client shared by the hundreds of threads of a worker in the threads mode makes every
    request wait for the pool's lock, under which it scans all its connections (httpcore),
    which costs the process more CPU than the step. A thread sends one request at a time, so
    its client keeps one connection."""
    client = getattr(_clients, "client", None)
    if client is None:
        client = _clients.client = httpx.Client(
            timeout=REMOTE_TIMEOUT_SECONDS, verify=_tls,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
    return client


def send_effect(ctx) -> StepResult:
    """A write step's call: POST /effects with the step's key."""
    response = _http().post(f"{ctx.input.url}/effects", json={"n": ctx.input.n},
                            headers={"Idempotency-Key": ctx.key})
    response.raise_for_status()
    body = response.json()
    return StepResult(body, remote_ref=body["id"])


def look_up_effect(ctx) -> Found | NotFound:
    response = _http().get(f"{ctx.input.url}/effects/{ctx.key}")
    if response.status_code == 404:
        return NotFound()
    response.raise_for_status()
    return Found(response.json()["id"])


def declare_remote_write(workflow: Workflow, name: str, *, owner: str, lookup_delay: float = 1.0,
                         **options) -> StepDef:
    """Declare on `workflow` a write step that POSTs to the run's receiver with its key
    (send_effect) and is looked up by that key (look_up_effect); `options` as for
    Workflow.write (a retry policy, an impact)."""
    step = workflow.write(name, honours_key=True, lookup_delay=lookup_delay,
                          contract=Contract(evidence="effect id", rule="reconcile by key",
                                            owner=owner), **options)(send_effect)
    step.reconcile(look_up_effect)
    return step
