"""An attacker without credentials: many connections sending random bearer tokens (``tokens``)
or holding half-sent requests (``--attack halfsent``).

``tokens``: each connection sends ``GET <path>`` with a fresh random ``Authorization: Bearer``
token, reads the answer and sends the next, until ``--seconds`` have passed (or ``--requests``
per connection, whichever comes first): a bounded loop. A connection the server closes is
opened again. Runs in a process of its own (the attacker's CPU is not the service's), used by
``tests/security/test_token_flood.py`` and ``bench/bench_attack.py``; prints one JSON line:
``{"answers": {"401": n, "429": n, ...}, "errors": n, "connections": n}``.

``halfsent``: ``--connections`` TLS connections from ``--sources`` loopback addresses
(127.0.0.1, .2, …), each sending a request head without its final empty line and holding it
(``tests.security.attack.hold``, the client of ``bench/bench_held_connections.py``); one the
server closed or refused is opened again, round after round, until ``--seconds`` have passed.
Its JSON line counts ``opened``, ``refused`` (closed before the head was sent), ``closed``
(held, then closed by the server: its request deadline) and ``held_max`` (the most held at the
end of a round).

    python bench/flood.py --url http://127.0.0.1:10255/state --connections 2000 --seconds 60
    python bench/flood.py --attack halfsent --url https://127.0.0.1:10250/ --connections 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import ssl
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.security.attack import client_context, hold, raise_fd_limit, still_open


async def one_connection(
    host: str,
    port: int,
    path: str,
    tls: ssl.SSLContext | None,
    deadline: float,
    requests: int,
    answers: Counter[str],
    errors: list[int],
) -> None:
    sent = 0
    while sent < requests and time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=tls), 10)
        except (OSError, TimeoutError):
            errors[0] += 1
            await asyncio.sleep(0.1)
            continue
        try:
            while sent < requests and time.monotonic() < deadline:
                token = secrets.token_urlsafe(24)
                writer.write(
                    f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
                )
                sent += 1
                head = await asyncio.wait_for(
                    reader.readuntil(b"\r\n\r\n"), max(1.0, deadline - time.monotonic())
                )
                status = head.split(b" ", 2)[1].decode()
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                answers[status] += 1
                if b"connection: close" in head.lower():
                    break
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError):
            errors[0] += 1
        finally:
            writer.close()


async def flood(url: str, connections: int, seconds: float, requests: int) -> dict[str, object]:
    parts = urlsplit(url)
    tls = None
    if parts.scheme == "https":
        tls = ssl.create_default_context()
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    port = parts.port or (443 if tls else 80)
    answers: Counter[str] = Counter()
    errors = [0]
    deadline = time.monotonic() + seconds
    await asyncio.gather(
        *(
            one_connection(
                parts.hostname or "127.0.0.1",
                port,
                parts.path or "/",
                tls,
                deadline,
                requests,
                answers,
                errors,
            )
            for _ in range(connections)
        )
    )
    return {"answers": dict(answers), "errors": errors[0], "connections": connections}


def halfsent(port: int, connections: int, sources: int, seconds: float) -> dict[str, object]:
    """Hold ``connections`` half-sent TLS requests; reopen each slot the server closed or refused
    (a bounded loop: until ``seconds`` have passed). Blocking, one connection at a time, as
    ``bench/bench_held_connections.py`` opens them."""
    raise_fd_limit(connections + 1024)
    context = client_context()
    held: list[ssl.SSLSocket | None] = [None] * connections
    counts: Counter[str] = Counter()
    held_max = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for i, sock in enumerate(held):
            if time.monotonic() >= deadline:
                break
            if sock is not None:
                if still_open(sock):
                    continue
                sock.close()
                counts["closed"] += 1
            try:
                held[i] = hold(port, context, f"127.0.0.{1 + i % sources}")
            except OSError:
                held[i] = None
            counts["opened" if held[i] is not None else "refused"] += 1
        held_max = max(held_max, sum(still_open(s) for s in held if s is not None))
        time.sleep(0.2)
    for sock in held:
        if sock is not None:
            sock.close()
    return {"answers": {**counts, "held_max": held_max}, "connections": connections}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attack", choices=("tokens", "halfsent"), default="tokens")
    parser.add_argument("--url", required=True)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--requests", type=int, default=1_000_000, help="per connection, at most")
    parser.add_argument("--sources", type=int, default=8, help="halfsent: source addresses 127.0.0.1..N")
    args = parser.parse_args()
    if args.attack == "halfsent":
        port = urlsplit(args.url).port or 443
        result = halfsent(port, args.connections, args.sources, args.seconds)
    else:
        result = asyncio.run(flood(args.url, args.connections, args.seconds, args.requests))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
