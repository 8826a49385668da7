"""A plain `http.server` service whose upstream call is guarded by a breaker.

    python examples/http_server.py --port 8000 --upstream http://127.0.0.1:9/

GET / calls the upstream through the breaker: 200 with its body, 502 when
the upstream fails, 503 with a Retry-After header when the breaker is
open (the upstream is not even tried). GET /breaker shows its metrics.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import tripline

upstream_breaker = tripline.CircuitBreaker(
    "upstream",
    window={"kind": "count", "size": 20},
    minimum_calls=5,
    failure_rate_threshold=0.5,
    open_duration="10s",
    failure_exceptions=(OSError, TimeoutError),
)
upstream_breaker.on_event(lambda event: logging.warning("%s", event))

UPSTREAM = "http://127.0.0.1:9/"


@upstream_breaker
def fetch_upstream(url: str) -> bytes:
    """Reads `url` (at most 2 s): the call the breaker guards."""
    with urllib.request.urlopen(url, timeout=2) as response:
        body: bytes = response.read()
        return body


class Handler(BaseHTTPRequestHandler):
    """Answers GET / through the breaker and GET /breaker with its metrics."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path == "/breaker":
            self.reply(200, json.dumps(upstream_breaker.metrics().as_dict()).encode())
            return
        try:
            self.reply(200, fetch_upstream(UPSTREAM))
        except tripline.CircuitOpenError as e:
            wait = e.retry_after
            headers = {"Retry-After": str(math.ceil(wait))} if wait is not None else {}
            self.reply(503, f"{e}\n".encode(), headers)
        except OSError as e:
            self.reply(502, f"upstream failed: {e}\n".encode())

    def reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    """Serves until interrupted."""
    global UPSTREAM
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--upstream", default=UPSTREAM)
    args = parser.parse_args()
    UPSTREAM = args.upstream
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"serving on http://127.0.0.1:{server.server_port}/ (upstream {UPSTREAM})")
    server.serve_forever()


if __name__ == "__main__":
    main()
