"""Run every benchmark in bench/ in turn and print their figures (``make bench``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHES = [
    "bench_placement.py",
    "bench_grpc.py",
    "bench_kube_client.py",
    "bench_pods.py",
    "bench_held_connections.py",
    "bench_attack.py",
    "endpoint_publication.py",
]


def main() -> int:
    here = Path(__file__).parent
    failed = 0
    for name in BENCHES:
        print(f"\n=== {name} ===", flush=True)
        failed += subprocess.call([sys.executable, str(here / name)]) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
