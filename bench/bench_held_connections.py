"""Memory of the kubelet API under held connections (issue 21, item 3): ``--attack halfsent``.

The real kubelet app behind the real server runs in a child process of its own
(``tests/security/kubelet_child.py``), so its RSS is the server's alone. The attacker opens
``--connections`` TLS connections from ``--sources`` loopback addresses (127.0.0.1, .2, …), each
sending a request head without its final empty line and holding it. Printed: connections held
and refused, the server's RSS before, under the attack and at its peak (``VmHWM``), and after
the request deadline has closed the held ones. ``--caps off`` runs the same with the caps and
timeouts lifted out of reach (what every server did before), for the comparison in one run.

    .venv/bin/python bench/bench_held_connections.py --attack halfsent
    .venv/bin/python bench/bench_held_connections.py --attack halfsent --caps off
"""

from __future__ import annotations

import argparse
import ssl
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.security.attack import client_context, hold, kubelet_child, raise_fd_limit, still_open  # noqa: E402

MIB = 1024  # kB per MiB (/proc/<pid>/status counts kB)
UNBOUNDED = {
    "max_connections": 1_000_000,
    "max_connections_per_peer": 1_000_000,
    "request_timeout_seconds": 3600,
    "tls_handshake_timeout_seconds": 3600,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--attack", choices=["halfsent"], default="halfsent")
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--sources", type=int, default=8, help="loopback source addresses 127.0.0.1..N")
    parser.add_argument("--caps", choices=["on", "off"], default="on")
    parser.add_argument("--request-timeout", type=float, default=15.0, help="seconds (the default limit)")
    args = parser.parse_args()
    limits = UNBOUNDED if args.caps == "off" else {"request_timeout_seconds": args.request_timeout}
    raise_fd_limit(args.connections + 1024)
    context = client_context()
    with tempfile.TemporaryDirectory() as directory, kubelet_child(Path(directory), **limits) as child:
        warm = hold(child.port, context)
        assert warm is not None, "the server did not take one connection"
        warm.close()
        time.sleep(0.5)
        before = child.rss_kib()
        started = time.monotonic()
        held: list[ssl.SSLSocket] = []
        for i in range(args.connections):
            sock = hold(child.port, context, f"127.0.0.{1 + i % args.sources}")
            if sock is not None:
                held.append(sock)
        flood_seconds = time.monotonic() - started
        under = child.rss_kib()
        open_now = sum(still_open(s) for s in held)
        print(
            f"attack: {args.attack}, caps {args.caps}, {args.connections} attempts from {args.sources} addresses"
        )
        print(f"  flood took {flood_seconds:.1f} s; held {len(held)}, refused {args.connections - len(held)}")
        print(f"  open after the flood: {open_now}")
        print(f"  server RSS before: {before / MIB:.1f} MiB")
        print(f"  server RSS under attack: {under / MIB:.1f} MiB (+{(under - before) / MIB:.1f} MiB)")
        if held:
            print(f"  per held connection: {(under - before) / len(held):.0f} KiB")
        if args.caps == "on":
            time.sleep(args.request_timeout + 3)  # the deadline closes what is held
            still = sum(still_open(s) for s in held)
            after = child.rss_kib()
            print(f"  after the request deadline: {still} still open, RSS {after / MIB:.1f} MiB")
        print(f"  server peak RSS (VmHWM): {child.peak_kib() / MIB:.1f} MiB")
        for sock in held:
            sock.close()


if __name__ == "__main__":
    main()
