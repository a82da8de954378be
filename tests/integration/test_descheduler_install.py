"""The documented Descheduler install (deploy/descheduler) on a real apiserver, and the policy the
real Descheduler then runs.

Upstream's manifests come from the pinned Go module (the same files as the remote ref users
fetch, ``rendering.with_local_upstream``). The cluster first gets upstream's install as it was
documented before (its example policy mounted), then ``kubectl apply --server-side -k`` of ours:

* the Deployment now mounts our hash-named policy ConfigMap (a new pod template: a new
  ReplicaSet), and an edited policy rolls it again;
* the Descheduler v0.36.0 binary is started the way that pod template starts it (its args, the
  ConfigMap's ``policy.yaml`` where the volume would mount it, the token of its ServiceAccount
  under upstream's RBAC minus the Secrets Role we drop), and its own metrics name every
  (profile, plugin) it ran: exactly those of deploy/descheduler/policy.yaml, none of upstream's
  example.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support import eventually
from tests.unit.deploy import rendering
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.build import Toolchain
from vkprovider.devcluster.process import free_port, spawn

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
NS = "kube-system"
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NS}/deployments/descheduler"
UPSTREAM_EXAMPLE = ("LowNodeUtilization", "RemoveDuplicates", "RemovePodsViolatingInterPodAntiAffinity")


def run_kubectl(cluster: Cluster, *args: str, check: bool = True) -> str:
    binary = rendering.kubectl()
    assert binary is not None
    done = subprocess.run(
        [binary, f"--kubeconfig={cluster.kubeconfig}", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 or not check, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


async def kubectl(cluster: Cluster, *args: str, check: bool = True) -> str:
    return await asyncio.to_thread(run_kubectl, cluster, *args, check=check)


def mounted_policy_name(deployment: JSON) -> str:
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/policy-dir"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    return str(volume["configMap"]["name"])


def ours(policy: str) -> set[tuple[str, str]]:
    """(profile, plugin) of every enabled deschedule/balance plugin of a policy."""
    return {
        (profile["name"], plugin)
        for profile in yaml.safe_load(policy)["profiles"]
        for point in ("deschedule", "balance")
        for plugin in ((profile.get("plugins") or {}).get(point) or {}).get("enabled") or []
    }


async def replica_sets(client: httpx.AsyncClient) -> set[str]:
    """The policy ConfigMap of each ReplicaSet the deployment controller made for the Descheduler."""
    body = (
        await client.get(
            f"/apis/apps/v1/namespaces/{NS}/replicasets", params={"labelSelector": "app=descheduler"}
        )
    ).json()
    return {mounted_policy_name(rs) for rs in body["items"]}


async def rolled_to(client: httpx.AsyncClient, name: str) -> bool:
    deployment = (await client.get(DEPLOYMENT)).json()
    return mounted_policy_name(deployment) == name and name in await replica_sets(client)


async def token_kubeconfig(cluster: Cluster, client: httpx.AsyncClient, path: Path) -> Path:
    resp = await client.post(
        f"/api/v1/namespaces/{NS}/serviceaccounts/descheduler-sa/token",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    assert resp.status_code == 201, resp.text
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": cluster.server, "certificate-authority": str(cluster.ca_cert)},
                    }
                ],
                "users": [{"name": "descheduler", "user": {"token": resp.json()["status"]["token"]}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "descheduler"}}],
                "current-context": "c",
            }
        )
    )
    return path


async def strategies_run(port: int) -> set[tuple[str, str]]:
    """(profile, strategy) the Descheduler's own metrics say it ran (after its first cycle)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate
    try:
        async with httpx.AsyncClient(verify=context, timeout=5) as client:
            text = (await client.get(f"https://127.0.0.1:{port}/metrics")).text
    except httpx.HTTPError:
        return set()
    found = set()
    for line in text.splitlines():
        if line.startswith("descheduler_strategy_duration_seconds_count{"):
            labels = dict(
                part.split("=", 1) for part in line[line.index("{") + 1 : line.index("}")].split(",")
            )
            found.add((labels["profile"].strip('"'), labels["strategy"].strip('"')))
    return found


async def test_the_install_runs_our_policy_and_a_new_policy_rolls_the_descheduler(
    cluster: Cluster, tmp_path: Path
) -> None:
    built = rendering.with_local_upstream(rendering.RENDERED_TARGETS["descheduler"], tmp_path / "descheduler")
    upstream = rendering.upstream_descheduler()
    async with cluster.http() as client:
        try:
            # the install as documented before: upstream's manifests with their example policy
            await kubectl(cluster, "apply", "--server-side", "-k", str(upstream))
            assert (
                mounted_policy_name((await client.get(DEPLOYMENT)).json()) == "descheduler-policy-configmap"
            )
            # the deployment controller never makes a ReplicaSet for a template replaced before it
            # got to it: wait for upstream's own before rolling to ours
            await eventually(lambda: rolled_to(client, "descheduler-policy-configmap"), timeout=60)

            await kubectl(cluster, "apply", "--server-side", "-k", str(built))
            policy = (built / "policy.yaml").read_text()
            name = mounted_policy_name((await client.get(DEPLOYMENT)).json())
            assert name != "descheduler-policy-configmap" and name.startswith("descheduler-policy-")
            await eventually(lambda: rolled_to(client, name), timeout=60)
            cm = (await client.get(f"/api/v1/namespaces/{NS}/configmaps/{name}")).json()
            assert cm["data"]["policy.yaml"] == policy

            # the running Descheduler, as that pod template starts it
            deployment = (await client.get(DEPLOYMENT)).json()
            (container,) = deployment["spec"]["template"]["spec"]["containers"]
            policy_dir = tmp_path / "policy-dir"
            policy_dir.mkdir()
            (policy_dir / "policy.yaml").write_text(cm["data"]["policy.yaml"])
            args = [a.replace("/policy-dir", str(policy_dir)) for a in container["args"]]
            port = free_port()
            kubeconfig = await token_kubeconfig(cluster, client, tmp_path / "descheduler.kubeconfig")
            proc = spawn(
                "descheduler-installed",
                Toolchain.default().binary("descheduler"),
                [
                    *args,
                    f"--kubeconfig={kubeconfig}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={tmp_path / 'certs'}",
                ],
                tmp_path,
            )
            try:
                ran = await eventually(lambda: strategies_run(port), timeout=90)
                assert proc.alive(), proc.exit_reason()
            finally:
                await asyncio.to_thread(proc.stop)
            log = Path(proc.log).read_text()
            assert ran == ours(policy), log[-3000:]
            assert not {s for _, s in ran} & set(UPSTREAM_EXAMPLE)
            assert "forbidden" not in log, log[-3000:]  # upstream's RBAC minus the Secrets Role suffices
            print(f"[descheduler install] running {sorted(ran)} from ConfigMap {name}")

            # an edited policy is a new ConfigMap name: applying it rolls the Descheduler
            edited = policy.replace("maxNoOfPodsToEvictTotal:", "maxNoOfPodsToEvictTotal: 3 #", 1)
            (built / "policy.yaml").write_text(edited)
            await kubectl(cluster, "apply", "--server-side", "-k", str(built))
            renamed = mounted_policy_name((await client.get(DEPLOYMENT)).json())
            assert renamed != name
            await eventually(lambda: rolled_to(client, renamed), timeout=60)
            assert await replica_sets(client) >= {"descheduler-policy-configmap", name, renamed}
            print(f"[descheduler install] edited policy: Deployment rolled {name} -> {renamed}")
        finally:
            for directory in (built, upstream):
                await kubectl(cluster, "delete", "--ignore-not-found", "-k", str(directory), check=False)
            maps = (await client.get(f"/api/v1/namespaces/{NS}/configmaps")).json()["items"]
            for item in maps:  # every policy ConfigMap an apply left behind (apply prunes nothing)
                if item["metadata"]["name"].startswith("descheduler-policy"):
                    await client.delete(f"/api/v1/namespaces/{NS}/configmaps/{item['metadata']['name']}")
            shutil.rmtree(built, ignore_errors=True)
