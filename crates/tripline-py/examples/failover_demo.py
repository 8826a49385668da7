"""Failover across three local HTTP nodes with `tripline.Cluster`.

    python examples/failover_demo.py

Starts three tiny HTTP servers, calls them through a failover cluster,
kills one, and shows the calls moving to the live nodes while the dead
node's breaker opens — then a failsafe cluster answering from a default,
marked degraded, when every node is gone.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import tripline


def start_node(name: str) -> ThreadingHTTPServer:
    """An HTTP server on a free loopback port that answers its name."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            body = name.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def get(address: str, path: str) -> str:
    """Calls one node: the function the cluster runs per endpoint."""
    host, port = address.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=2)
    try:
        conn.request("GET", path)
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def main() -> None:
    """Runs the demo."""
    nodes = {name: start_node(name) for name in ("a", "b", "c")}
    addresses = [f"127.0.0.1:{s.server_port}" for s in nodes.values()]
    breaker = {"window": {"kind": "count", "size": 10}, "minimum_calls": 3, "open_duration": "30s"}
    cluster = tripline.Cluster(addresses, call=get, strategy="failover", retries=2, breaker=breaker)

    print("all up:   ", [cluster("/") for _ in range(6)])
    nodes["a"].shutdown()
    nodes["a"].server_close()
    print("a killed: ", [cluster("/") for _ in range(6)])
    for endpoint in cluster.endpoints:
        print(f"  {endpoint['address']}: breaker {endpoint['state']}")

    failsafe = tripline.Cluster(addresses[:1], call=get, strategy="failsafe", default="(cached page)")
    served = failsafe.call("/")
    print(f"failsafe: {served.value!r} degraded={served.degraded} reason={served.reason}")


if __name__ == "__main__":
    main()
