"""Blocking attack clients against a server in a child process (:mod:`.kubelet_child`): hold
connections with half-sent requests and read the child's memory. Shared by the tests and
``bench/bench_held_connections.py``."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: A request head without its final empty line: the server waits for the rest.
HALF_SENT = b"GET /pods HTTP/1.1\r\nHost: vk\r\nAuthorization: Bearer x"

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Child:
    process: subprocess.Popen[str]
    port: int

    def rss_kib(self) -> int:
        return _status_kib(self.process.pid, "VmRSS")

    def peak_kib(self) -> int:
        return _status_kib(self.process.pid, "VmHWM")


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise LookupError(key)


@contextlib.contextmanager
def kubelet_child(directory: Path, **limits: float) -> Iterator[Child]:
    """The kubelet app in a child process; stopped by its PID on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.security.kubelet_child", str(directory), json.dumps(limits)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield Child(process, port)
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def raise_fd_limit(wanted: int = 8192) -> None:
    """Room for thousands of client sockets (the soft limit is often 1024); the child inherits it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def client_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def hold(
    port: int, context: ssl.SSLContext, source: str = "127.0.0.1", timeout: float = 10.0
) -> ssl.SSLSocket | None:
    """One TLS connection with a half-sent request, or None if the server refused or closed it."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    try:
        tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
        tls.sendall(HALF_SENT)
    except (OSError, ssl.SSLError):
        raw.close()
        return None
    return tls


def still_open(sock: socket.socket) -> bool:
    """True if the server has neither closed the connection nor answered (a non-blocking peek)."""
    try:
        sock.setblocking(False)
        sock.recv(1)
    except (BlockingIOError, ssl.SSLWantReadError):
        return True
    except (OSError, ssl.SSLError):
        return False
    finally:
        with contextlib.suppress(OSError):
            sock.setblocking(True)
    return False  # an answer (a 408) or the end of the connection


def closed_within(sock: socket.socket, limit: float) -> bytes | None:
    """What the server sent before closing the connection, or None if it was still open after
    ``limit`` seconds (a bound against hanging, not a timing check)."""
    sock.settimeout(limit)
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except TimeoutError:
        return None
    except (OSError, ssl.SSLError):
        pass
    return got
