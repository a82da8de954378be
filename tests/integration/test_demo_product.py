"""The product inside the demo: README's Quick-start commands, run verbatim against the demo's
stack (quick.yaml's: control plane with Kueue, fakeclouds, ``vkprovider serve`` with its kubelet
API on the namespace address, metrics-server, the shipped Descheduler policy), and a user's
Deployment in a namespace of its own bursting out and coming home.

The day itself is not played (tests/integration/test_simulation.py does that): what a user does
after ``make demo`` needs only what ``make demo`` leaves running. The admin API is on the demo's
own port 10255, because the README's ``vkprovider status``/``explain`` lines name no address.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.gate_support import descheduler_evictions
from tests.support import eventually
from vkprovider.devcluster.build import Toolchain
from vkprovider.devcluster.descheduler import POLICY_FILE, shipped_policy
from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.sim.demo import ADMIN_PORT
from vkprovider.sim.scenario import load_scenario
from vkprovider.sim.stack import Stack, node_names

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
QUICK = REPO / "deploy" / "examples" / "scenarios" / "quick.yaml"
USER_NS = "team-a"


def readme_commands() -> list[str]:
    """The ``sh`` block of README's Quick start that starts with ``kubectl apply`` of gpu-pod."""
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    block = next(b for b in blocks if b.startswith("kubectl apply -f deploy/examples/gpu-pod.yaml"))
    return [line for line in block.splitlines() if line.strip()]


def admin_port_free() -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", ADMIN_PORT))
        except OSError:
            return False
    return True


class Shell:
    """The user's shell after running the demo's export line, in the repository's root."""

    def __init__(self, stack: Stack) -> None:
        bin_dir = Toolchain.default().bin_dir
        self.env = {
            **os.environ,
            "KUBECONFIG": str(stack.cluster.kubeconfig),
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
        }

    async def start(self, line: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_shell(
            line,
            cwd=REPO,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )

    async def run(self, line: str, timeout: float = 60) -> tuple[int, str, str]:
        proc = await self.start(line)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise
        return proc.returncode or 0, out.decode(), err.decode()

    async def until_ok(self, line: str, timeout: float = 120) -> str:
        """Run ``line`` until it exits 0 (a pod still being deployed, metrics not scraped yet)."""
        deadline = time.monotonic() + timeout
        while True:
            code, out, err = await self.run(line)
            if code == 0:
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"{line!r} kept failing ({code}): {err.strip()[-500:]}")
            await asyncio.sleep(2)

    async def follow(self, line: str, lines: int, timeout: float = 60) -> list[str]:
        """A following command: its first ``lines`` lines, then Ctrl-C."""
        proc = await self.start(line)
        assert proc.stdout is not None
        got: list[str] = []
        try:
            async with asyncio.timeout(timeout):
                while len(got) < lines:
                    raw = await proc.stdout.readline()
                    if not raw:
                        break
                    got.append(raw.decode().rstrip())
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            await proc.wait()
        return got


@pytest.fixture
async def demo() -> AsyncIterator[Stack]:
    if not admin_port_free():
        pytest.skip(f"127.0.0.1:{ADMIN_PORT} is taken (a make demo running?): the README's commands use it")
    stack = await Stack.up(
        load_scenario(QUICK), cluster_name=f"demoprod-{os.getpid()}", admin_port=ADMIN_PORT
    )
    try:
        if not stack.kubelet_url:
            pytest.skip("no kubelet network namespace (ip netns needs root): the demo serves no kubelet API")
        yield stack
    finally:
        await stack.down()
        shutil.rmtree(stack.cluster.workdir, ignore_errors=True)  # 70 MB of etcd and logs a run


async def test_readme_commands_and_a_user_deployment_coming_home(demo: Stack) -> None:
    shell = Shell(demo)
    assert demo.metrics_server and demo.descheduler, demo.notes
    descheduler = next(p for p in demo.processes if p.name == "descheduler")
    argv = Path(f"/proc/{descheduler.pid}/cmdline").read_bytes().decode().split("\0")
    # the shipped policy, every plugin and cap as shipped; only minPodAge is on the simulated clock
    policy_file = next(a.split("=", 1)[1] for a in argv if a.startswith("--policy-config-file="))
    running = yaml.safe_load(Path(policy_file).read_text())
    assert running == shipped_policy(min_pod_age="1s")
    assert running != shipped_policy()  # (the one difference is really there)
    kube = await KubeClient.connect(str(demo.cluster.kubeconfig))
    try:
        node = await kube.request("GET", f"/api/v1/nodes/{demo.virtual_node}")
        addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
        assert addresses["InternalIP"] == demo.cluster.kubelet_net.host_ip  # type: ignore[union-attr]

        commands = readme_commands()
        print(f"\n[demo] {len(commands)} README commands, run verbatim:")
        for line in commands:
            if " -f " in line and line.startswith("kubectl logs"):
                got = await shell.follow(line, lines=2)
                assert got and all(got), f"{line!r} streamed nothing"
                print(f"$ {line}\n" + "\n".join(got) + "\n^C")
                continue
            out = await shell.until_ok(line)
            print(f"$ {line}\n{out.rstrip()}")
            if line.startswith("kubectl logs"):
                assert out.strip(), "kubectl logs printed nothing"
            if line.startswith("kubectl top pod"):
                assert "gpu-pod" in out and "m " in out
            if "proxy/stats/summary" in line:
                summary = json.loads(out)
                assert summary["node"]["nodeName"] == demo.virtual_node
                assert [p["podRef"]["name"] for p in summary["pods"]] == ["gpu-pod"]
            if "vkprovider explain" in line:
                assert "decision for pod default/gpu-pod" in out
            if "vkprovider status" in line:
                assert "node vk-external (leader)" in out and "pods 1 " in out

        await comes_home(shell, kube, demo)
    finally:
        await kube.close()


async def comes_home(shell: Shell, kube: KubeClient, demo: Stack) -> None:
    """deploy/examples/inference-local-first.yaml in its own namespace: out while the local
    nodes are cordoned (the gate lifts its taint), home once they are back (the gate taints, the
    shipped policy's Descheduler evicts, the scheduler places the replacements locally)."""
    nodes = node_names(load_scenario(QUICK))

    async def cordon(on: bool) -> None:
        for name in nodes:
            body = {"spec": {"unschedulable": on}}
            await kube.request("PATCH", f"/api/v1/nodes/{name}", body=body, content_type=MERGE_PATCH)

    async def placement() -> tuple[int, int]:
        pods = (await kube.request("GET", f"/api/v1/namespaces/{USER_NS}/pods"))["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        out = sum(
            1
            for p in live
            if p["spec"].get("nodeName") == demo.virtual_node and p["status"].get("phase") == "Running"
        )
        home = sum(1 for p in live if p["spec"].get("nodeName") in nodes)
        return home, out

    async def tainted() -> bool:
        node = await kube.request("GET", f"/api/v1/nodes/{demo.virtual_node}")
        return any(t["key"] == demo.gate_taint_key for t in node["spec"].get("taints") or [])

    await shell.until_ok(f"kubectl create namespace {USER_NS}")
    await shell.until_ok("kubectl apply -f deploy/examples/priority-classes.yaml")
    await cordon(True)
    await eventually(lambda: _not(tainted), timeout=60)
    await shell.until_ok(f"kubectl apply -n {USER_NS} -f deploy/examples/inference-local-first.yaml")
    deployment = await kube.request("GET", f"/apis/apps/v1/namespaces/{USER_NS}/deployments/inference")
    want = int(deployment["spec"]["replicas"])

    async def all_out() -> bool:
        return await placement() == (0, want)

    await eventually(all_out, timeout=120)
    print(
        f"[demo] {USER_NS}/inference: {want} replicas on {demo.virtual_node} while the local nodes are cordoned"
    )
    await cordon(False)
    await eventually(tainted, timeout=60)

    async def all_home() -> bool:
        home, out = await placement()
        return home == want and out == 0

    await eventually(all_home, timeout=180)
    evicted = descheduler_evictions(demo.logs / "descheduler.log", USER_NS)
    assert evicted, f"the Descheduler evicted nothing in {USER_NS}: something else brought the replicas home"
    print(f"[demo] the Descheduler evicted {len(evicted)} pods in {USER_NS}")
    print(
        f"[demo] {USER_NS}/inference: all {want} replicas home after the uncordon (shipped policy {POLICY_FILE})"
    )


async def _not(check: Any) -> bool:
    return not await check()
