#!/usr/bin/env python3
"""Hostile clients against the release `tripline proxy`, on loopback: what
the proxy holds (resident memory, descriptors) while they come and after
they go. The figures are docs/reliability.md's "Hostile clients" table.

    python3 benches/proxy/hostile.py [path/to/tripline]   (default: target/release/tripline)

Bounded: 2 000 connections at most, every wait a few seconds, everything on
127.0.0.1, the proxy and the upstream stopped at the end.

1. 2 000 connections each send an unfinished head of 60 000 bytes (under
   the 64 KiB `max_header_bytes`) and wait; then they close.
2. The same with 100 000-byte heads: refused at the limit (431).
3. With the proxy's descriptors limited to 300, 200 GETs to an endpoint
   that never answers, each abandoned by its client once the endpoint has
   it; then a healthy request.
"""

import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
TRIPLINE = ARGS[0] if ARGS else os.path.join(ROOT, "target/release/tripline")
CONNECTIONS = 2000
ABANDONED = 200


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Upstream:
    """Answers /healthy at once; holds every other request unanswered,
    counting the sockets it holds until the proxy closes them."""

    def __init__(self):
        self.port = free_port()
        self.arrived = 0
        self.held = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", self.port), backlog=1024)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                conn.close()
                return
            head += chunk
        if head.startswith(b"GET /healthy"):
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            conn.close()
            return
        with self.lock:
            self.arrived += 1
            self.held += 1
        while conn.recv(4096):
            pass
        conn.close()
        with self.lock:
            self.held -= 1


def start_proxy(upstream, nofile=None):
    port = free_port()
    work = tempfile.mkdtemp()
    config = os.path.join(work, "proxy.toml")
    with open(config, "w") as f:
        f.write(f"""[proxy]
header_read_timeout = "60s"

[[listeners]]
address = "127.0.0.1:{port}"

[[routes]]
name = "healthy"
cluster = "backend"
match = {{ path_prefix = "/healthy" }}

[[routes]]
name = "api"
cluster = "backend"

[clusters.backend]
endpoints = ["127.0.0.1:{upstream.port}"]
""")

    def limit():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proxy = subprocess.Popen(
        [TRIPLINE, "proxy", "--config", config, "--threads", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=limit)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proxy, port
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the proxy did not start")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def healthy(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = s.recv(512).decode(errors="replace")
    except OSError as e:
        return f"healthy request failed: {e}"
    lines = answer.split("\r\n")
    rejected = [l for l in lines if l.lower().startswith("x-tripline-rejected")]
    return " ".join([lines[0]] + rejected)


def settle(seconds=2.0):
    time.sleep(seconds)


def unfinished_heads(proxy, port, size):
    pid = proxy.pid
    before = (rss_kib(pid), fds(pid))
    head = b"GET / HTTP/1.1\r\nHost: x\r\nx-slow: " + b"a" * size
    clients = []
    refused = 0
    for _ in range(CONNECTIONS):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            s.sendall(head)
        except OSError:
            refused += 1
        clients.append(s)
    settle()
    peak = (rss_kib(pid), fds(pid))
    answers = 0
    for s in clients:
        s.setblocking(False)
        try:
            if s.recv(16).startswith(b"HTTP/1.1 431"):
                answers += 1
        except OSError:
            pass
        s.close()
    settle()
    after = (rss_kib(pid), fds(pid))
    # The allocator (mimalloc) returns pages free for a second at its
    # next call: an idle proxy keeps them until its next request.
    served = healthy(port)
    settle(0.2)
    served += " " + healthy(port)
    returned = rss_kib(pid)
    print(f"{CONNECTIONS} unfinished heads of {size} bytes: RSS {before[0]} KiB before, "
          f"{peak[0]} KiB held, {after[0]} KiB after they closed (idle), {returned} KiB "
          f"after the next requests; descriptors {before[1]} / {peak[1]} / {after[1]}; "
          f"answered 431: {answers}; {served}")


def abandoned(upstream, proxy, port):
    pid = proxy.pid
    before = fds(pid)
    start = upstream.arrived
    lost = 0
    for i in range(ABANDONED):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            s.sendall(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        except OSError:
            lost += 1
            continue
        deadline = time.monotonic() + 0.5
        while upstream.arrived - start <= i - lost and time.monotonic() < deadline:
            time.sleep(0.001)
        if upstream.arrived - start <= i - lost:
            lost += 1
        s.close()
    settle()
    print(f"  requests that never reached the endpoint (descriptors exhausted): {lost}")
    print(f"{ABANDONED} abandoned GETs (proxy limited to 300 descriptors): descriptors "
          f"{before} before, {fds(pid)} after; upstream sockets still held {upstream.held} "
          f"of {upstream.arrived}; then {healthy(port)}")


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    upstream = Upstream()
    proxy, port = start_proxy(upstream)
    try:
        print(healthy(port))
        if "--abandoned-only" not in sys.argv:
            unfinished_heads(proxy, port, 60_000)
            unfinished_heads(proxy, port, 100_000)
    finally:
        proxy.terminate()
        proxy.wait(15)
    proxy, port = start_proxy(upstream, nofile=300)
    try:
        abandoned(upstream, proxy, port)
    finally:
        proxy.terminate()
        proxy.wait(15)


if __name__ == "__main__":
    main()
