"""Run every benchmark in bench/ in turn and print their figures (``make bench``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: (script, its arguments): bench_pods.py twice, the service and then the floor it is read against
BENCHES: list[tuple[str, ...]] = [
    ("bench_placement.py",),
    ("bench_grpc.py",),
    ("bench_kube_client.py",),
    ("bench_pods.py",),
    ("bench_pods.py", "--service", "floor"),
    ("bench_held_connections.py",),
    ("bench_attack.py",),
    ("endpoint_publication.py",),
]


def main() -> int:
    here = Path(__file__).parent
    failed = 0
    for name, *arguments in BENCHES:
        print(f"\n=== {' '.join([name, *arguments])} ===", flush=True)
        failed += subprocess.call([sys.executable, str(here / name), *arguments]) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
