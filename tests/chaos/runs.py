"""One chaos run as a module-scoped fixture body: start the rig, run the plan, collect, stop."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from tests.chaos import report
from tests.chaos.rig import Plan, Rig
from vkprovider.devcluster import Cluster

KEEP_RUNS = 6


def run_dir(kind: str, seed: int) -> Path:
    """``~/.cache/vkprovider/chaos/<kind>-<seed>-<time>``: the replicas' logs outlive pytest's
    rotating tmp dirs; only the newest ``KEEP_RUNS`` are kept."""
    base = Path(os.environ.get("VKPROVIDER_CACHE") or Path.home() / ".cache" / "vkprovider") / "chaos"
    base.mkdir(parents=True, exist_ok=True)
    for old in sorted(base.iterdir(), key=lambda p: p.stat().st_mtime)[:-KEEP_RUNS]:
        shutil.rmtree(old, ignore_errors=True)
    return base / f"{kind}-{seed}-{time.strftime('%Y%m%d-%H%M%S')}"


async def chaos_run(cluster: Cluster, kind: str, seed: int, plan: Plan) -> report.Report:
    workdir = run_dir(kind, seed)
    print(f"\nchaos seed {seed}: replay with VKPROVIDER_CHAOS_SEED={seed}", flush=True)
    rig = Rig(cluster, workdir, seed, plan)
    started = time.monotonic()
    try:
        await rig.start()
        await rig.run()
        result = await report.collect(rig)
    finally:
        await rig.stop()
    text = result.summary() + f"\n  run took {time.monotonic() - started:.0f}s; logs in {workdir}"
    report.PRINTED.append(text)
    print(text, flush=True)
    return result
