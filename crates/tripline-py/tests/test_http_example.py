"""The http.server example against a real local upstream over TCP."""

from __future__ import annotations

import importlib.util
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


def load_example():
    path = Path(__file__).parent.parent / "examples" / "http_server.py"
    spec = importlib.util.spec_from_file_location("http_server_example", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["http_server_example"] = module
    spec.loader.exec_module(module)
    return module


class Upstream(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = b"upstream says hi"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(handler) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def get(url: str) -> tuple[int, bytes, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def test_breaker_opens_on_a_dead_upstream_and_answers_503():
    example = load_example()
    upstream = serve(Upstream)
    example.UPSTREAM = f"http://127.0.0.1:{upstream.server_port}/"
    example.Handler.log_message = lambda *a: None
    front = serve(example.Handler)
    base = f"http://127.0.0.1:{front.server_port}"
    try:
        assert get(base + "/")[:2] == (200, b"upstream says hi")
        upstream.shutdown()
        upstream.server_close()  # connections are now refused
        statuses = [get(base + "/")[0] for _ in range(6)]
        assert statuses[:4] == [502] * 4  # failures sampled (5 calls minimum)
        assert statuses[-1] == 503
        status, body, headers = get(base + "/")
        assert status == 503 and b"open" in body
        assert 1 <= int(headers["Retry-After"]) <= 10
        status, body, _ = get(base + "/breaker")
        assert status == 200 and b'"state":"open"' in body.replace(b" ", b"")
    finally:
        front.shutdown()
        front.server_close()
