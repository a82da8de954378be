"""``make demo``: one simulated day of the GPU cluster on a real local control plane.

``up [--scenario FILE]`` validates the scenario (default ``deploy/examples/scenarios/krea-day.yaml``;
a bad field stops here, before anything starts), runs it (vkprovider.sim.runner) with a live
view on stderr, prints where the report is and its cost table and invariants, and leaves
everything running: the last line on stdout is ``export KUBECONFIG=... PATH=...``. It exits 3
when an invariant broke (every invariant is part of the verdict), naming each on stderr, so a
CI job or a script notices. ``down`` stops every process it started, by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from vkprovider.devcluster import StartupError
from vkprovider.devcluster.build import Toolchain
from vkprovider.sim import stack
from vkprovider.sim.report import compute
from vkprovider.sim.runner import RunOptions, run
from vkprovider.sim.scenario import ScenarioError, load_scenario

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SCENARIO = REPO / "deploy" / "examples" / "scenarios" / "krea-day.yaml"
CLUSTER_NAME = "demo"
BROKEN = 3  #: exit status of a run whose report's verdict names a broken invariant
ADMIN_PORT = 10255


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _summary(folder: Path) -> str:
    """The report's cost table and invariants, for the terminal."""
    text = (folder / "report.md").read_text()
    start = text.find("## Cost per provider")
    verdict = next((line for line in text.splitlines() if line.startswith("**Verdict")), "")
    body = text[start:].split("Files:")[0].strip() if start >= 0 else text
    return f"{verdict}\n\n{body}"


async def up(scenario_path: Path) -> int:
    scenario = load_scenario(scenario_path)
    options = RunOptions(cluster_name=CLUSTER_NAME, admin_port=ADMIN_PORT, keep_running=True)
    result = await run(scenario, options)
    _, _, invariants = compute(result.recording)
    _say("")
    _say(_summary(result.folder))
    _say(f"\nreport: {result.folder / 'report.md'}")
    _say(f"chart:  {result.folder / 'timeline.png'}")
    _say(
        f"logs: {result.stack.logs}   admin API: {result.stack.admin_url}/state   "
        "stop everything with: make demo-down"
    )
    # The same line as `make cluster-up`: kubectl is the pinned v1.36 client, not the machine's.
    print(f"export KUBECONFIG={result.stack.cluster.kubeconfig} PATH={Toolchain.default().bin_dir}:$PATH")
    if not invariants.ok:
        _say("error: invariants broken in this run: " + "; ".join(invariants.broken))
        return BROKEN
    return 0


async def down(*, quiet: bool = False) -> int:
    found = await stack.down(CLUSTER_NAME)
    if not quiet:
        _say("demo stopped" if found else "demo was not running")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkprovider.sim.demo")
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument(
        "--scenario", type=Path, default=DEFAULT_SCENARIO, help="scenario YAML (docs/simulation.md)"
    )
    args = parser.parse_args(argv)
    try:
        return asyncio.run(up(args.scenario) if args.command == "up" else down())
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StartupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
