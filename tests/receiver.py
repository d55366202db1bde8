"""A real HTTP receiver on localhost whose answers a test scripts: a status per path
prefix and method, repeated forever (or a list of statuses, the last repeated), and the JSON
body of its error answers if the test gives one."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedReceiver:
    def __init__(self):
        self.answers: dict[tuple[str, str], list[int]] = {}
        self.error_bodies: dict[tuple[str, str], dict] = {}
        self.requests: list[tuple[str, str, float]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                prefix = "/" + self.path.strip("/").split("/")[0]
                with receiver._lock:
                    receiver.requests.append((self.command, self.path, time.monotonic()))
                    queue = receiver.answers.get((self.command, prefix), [200])
                    status = queue.pop(0) if len(queue) > 1 else queue[0]
                    error = receiver.error_bodies.get((self.command, prefix), {"error": status})
                body = json.dumps({"id": f"R-{len(receiver.requests)}"}
                                  if status == 200 else error).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, method: str, prefix: str, *statuses: int, error_body: dict | None = None
               ) -> None:
        self.answers[(method, prefix)] = list(statuses)
        if error_body is not None:
            self.error_bodies[(method, prefix)] = error_body

    def sent(self, method: str, prefix: str) -> list[float]:
        """When each request of `method` to `prefix` arrived."""
        return [t for m, p, t in self.requests if m == method and p.startswith(prefix)]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
