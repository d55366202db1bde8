"""A real HTTP endpoint on localhost for webhook deliveries, as a subscriber runs one: it
keeps each delivery's headers and body as received and answers the status `answer(headers,
body)` gives (204 unless a test says otherwise)."""

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookReceiver:
    def __init__(self, answer: Callable[[dict, bytes], int] | None = None):
        self.requests: list[tuple[dict, bytes]] = []
        self.answer = answer or (lambda headers, body: 204)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = dict(self.headers)
                receiver.requests.append((headers, body))
                self.send_response(receiver.answer(headers, body))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
