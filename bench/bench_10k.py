"""10,000 pods on one virtual node (issue 13): up, idle for a minute, gracefully down.

``bench_pods.py`` with ``--pods 10000 --steady-seconds 60 --raw-pods 2000`` on a control plane
sized for it (``ControlPlaneSize.large()``, devcluster/sizing.py). Not part of ``make bench``
(it takes ~10 minutes here); run it on its own:

    .venv/bin/python bench/bench_10k.py [more bench_pods.py flags]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).parent
    flags = ["--pods", "10000", "--steady-seconds", "60", "--raw-pods", "2000", "--timeout", "1800"]
    return subprocess.call([sys.executable, str(here / "bench_pods.py"), *flags, *sys.argv[1:]])


if __name__ == "__main__":
    raise SystemExit(main())
