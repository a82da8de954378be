"""The built image, run with podman the way the Deployment's pod runs it, against the dev cluster.

``make image-test`` (and ``make test`` where containers can run; elsewhere these tests skip,
naming why). One control plane for the module, with an audit log of the base's ServiceAccount,
and the base's RBAC applied (the demo overlay's ServiceAccount, roles and bindings, its served
namespace ``default`` included). Each container gets what the kubelet would give the pod, read
from the rendered Deployment of ``deploy/overlays/demo``:

* its user and group, a read-only root, no capabilities, no privilege escalation;
* a TokenRequest token of the ServiceAccount, the cluster's CA and the namespace at
  ``/var/run/secrets/kubernetes.io/serviceaccount``, and ``KUBERNETES_SERVICE_HOST/PORT``;
* the overlay's rendered config at ``/etc/vkprovider/config.yaml`` (the ConfigMap's mount), and
  the Deployment's environment as the kubelet resolves it (the pod IP, the pod name);
* the Deployment's emptyDirs (``/tmp``, the kubelet certificate's ``cert_dir``) as tmpfs mounts
  of their size limits.

Adapted only where the dev cluster requires it: the containers share the machine's network
(``--network host``; the apiserver listens on 127.0.0.1, its serving certificate names
127.0.0.1), so ``KUBERNETES_SERVICE_HOST`` is 127.0.0.1, the admin and kubelet ports are free
ports instead of 10255/10250 (the admin port on 127.0.0.1), the pod's IP is the dev cluster's
kubelet address (a 198.18.x.y on this machine: the apiserver will not proxy to loopback), and
the two fakeclouds of the overlay run in the test on 127.0.0.1 instead of behind their Services;
``approve-csr`` gets the pod IP with ``--ip`` (the containers are no pods it could list).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.image.image_support import MARKS, built_image
from tests.support import bound_gpu_pod, eventually
from tests.unit.deploy import rendering
from vkprovider.cli import main as vkprovider_main
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.audit import accesses, read_events
from vkprovider.devcluster.containers import ULIMITS, Engines
from vkprovider.devcluster.process import free_port
from vkprovider.kube.client import KubeClient
from vkprovider.sim.local import fakecloud_module

pytestmark = MARKS

JSON = dict[str, Any]
NAMESPACE, ACCOUNT = rendering.SERVICE_ACCOUNT
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
NODE = "vk-external"
SERVED = "default"  # the demo overlay's served namespace (served-namespaces.yaml)
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: Writes the service's user tries inside the container: only /tmp (the emptyDir) may succeed.
WRITE_PROBE = """
import errno, json, os
result = {}
for where in ("/tmp", "/opt/vkprovider", "/etc"):
    try:
        with open(os.path.join(where, "probe"), "w") as f:
            f.write("x")
        result[where] = "ok"
    except OSError as exc:
        result[where] = errno.errorcode[exc.errno]
print(json.dumps(result))
"""
RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


@pytest.fixture(scope="module")
def demo() -> list[JSON]:
    return rendering.objects(rendering.render("demo"))


@pytest.fixture(scope="module")
def pod_spec(demo: list[JSON]) -> JSON:
    spec: JSON = rendering.one(demo, "Deployment", "vkprovider")["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def image() -> str:
    """The image, built by ``make image`` (or here, reusing its layer cache)."""
    return built_image()


@pytest.fixture(scope="module")
async def cluster(image: str) -> AsyncIterator[Cluster]:
    started = await Cluster.start(f"image-{os.getpid()}", gpu_nodes=1, audit_users=(USER,))
    try:
        yield started
    finally:
        await started.stop(remove=not os.environ.get("VKPROVIDER_TEST_KEEP_CLUSTER"))


def kubectl_result(
    cluster: Cluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    binary = rendering.kubectl()
    assert binary is not None
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    return subprocess.run(
        [binary, *args], input=stdin, capture_output=True, text=True, env=env, timeout=120, check=False
    )


def kubectl(cluster: Cluster, *args: str, stdin: str | None = None) -> str:
    done = kubectl_result(cluster, *args, stdin=stdin)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
async def admin(cluster: Cluster, demo: list[JSON]) -> AsyncIterator[KubeClient]:
    """An admin client, once the overlay's RBAC (and only that: no Deployment) is applied."""
    rbac = [doc for doc in demo if doc["kind"] in RBAC_KINDS]
    kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(rbac))
    client = await KubeClient.connect(str(cluster.kubeconfig))
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="module")
async def service_account(
    cluster: Cluster, admin: KubeClient, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """What the kubelet projects into the pod: a TokenRequest token, the CA, the namespace."""
    response = await admin.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{ACCOUNT}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    directory = tmp_path_factory.mktemp("serviceaccount")
    (directory / "token").write_text(response["status"]["token"])
    shutil.copyfile(cluster.ca_cert, directory / "ca.crt")
    (directory / "namespace").write_text(NAMESPACE)
    for path in (directory, *directory.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)  # readable by the pod's user, as projected
    return directory


@pytest.fixture(scope="module")
async def clouds(demo: list[JSON]) -> AsyncIterator[dict[str, Any]]:
    """The overlay's two fakeclouds, from their ConfigMaps, on 127.0.0.1."""
    module = fakecloud_module("server")
    parse = fakecloud_module("config").parse_config
    servers: dict[str, Any] = {}
    try:
        for provider in rendering.service_config(demo)["providers"]:
            name = provider["name"]
            (config_map,) = [
                d for d in rendering.find(demo, "ConfigMap") if d["metadata"]["name"].startswith(f"{name}-")
            ]
            servers[name] = module.FakeCloudServer(parse(yaml.safe_load(config_map["data"]["config.yaml"])))
            await servers[name].start()
        yield servers
    finally:
        for server in servers.values():
            await server.stop()


def config_dir(demo: list[JSON], clouds: dict[str, Any], directory: Path, **override: Any) -> Path:
    """The overlay's rendered config (the ConfigMap's ``config.yaml``), its clouds on 127.0.0.1."""
    config = rendering.service_config(demo)
    for provider in config["providers"]:
        provider["settings"]["url"] = clouds[provider["name"]].url
    for dotted, value in override.items():
        section, field = dotted.split("__")
        config[section][field] = value
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    (directory / "config.yaml").write_text(yaml.safe_dump(config))
    (directory / "config.yaml").chmod(0o644)
    return directory


@dataclass(frozen=True)
class Kubelet:
    """What the kubelet gives every replica: the image, the pod spec, the projected ServiceAccount
    token, the apiserver's port and the pod's IP."""

    image: str
    pod_spec: JSON
    service_account: Path
    api_port: int
    #: the address the node advertises: the dev cluster's kubelet address (a 198.18.x.y the
    #: apiserver may proxy to; it refuses loopback), or 127.0.0.1 where it has none (then
    #: ``proxied`` is False and the kubelet API's test skips)
    pod_ip: str
    proxied: bool


class Container:
    """One replica of the Deployment as a podman container (detached); removed by ``remove``."""

    def __init__(self, kubelet: Kubelet, config: Path) -> None:
        self.engines = Engines.default()
        self.name = f"vkprovider-test-{uuid.uuid4().hex[:8]}"
        self.admin_port, self.kubelet_port = free_port(), free_port()
        self.grace = int(kubelet.pod_spec["terminationGracePeriodSeconds"])
        self.argv = self.engines.podman(
            "run",
            "--name",
            self.name,
            *pod_flags(kubelet.pod_spec, config),
            *pod_env(kubelet.pod_spec, pod_ip=kubelet.pod_ip, pod_name=self.name),
            "--volume",
            f"{kubelet.service_account}:{SA_DIR}:ro",
            "--env",
            "KUBERNETES_SERVICE_HOST=127.0.0.1",
            "--env",
            f"KUBERNETES_SERVICE_PORT={kubelet.api_port}",
            # host network: the pod's ports become free ports, the admin port on 127.0.0.1
            "--network",
            "host",
            "--env",
            "VKPROVIDER_HTTP__ADMIN_HOST=127.0.0.1",
            "--env",
            f"VKPROVIDER_HTTP__ADMIN_PORT={self.admin_port}",
            "--env",
            f"VKPROVIDER_NODE__KUBELET_PORT={self.kubelet_port}",
            kubelet.image,
        )

    @property
    def mounts(self) -> list[str]:
        """The mount targets (volumes and tmpfs) as the runtime resolves them (/var/run → /run)."""
        targets = [
            self.argv[i + 1].split(":")[1 if flag == "--volume" else 0]
            for i, flag in enumerate(self.argv)
            if flag in ("--volume", "--tmpfs")
        ]
        return [target.replace("/var/run/", "/run/", 1) for target in targets]

    def start(self) -> None:
        self.engines.run([*self.argv[:-1], "--detach", self.argv[-1]], f"podman run {self.name}")

    def run(self) -> subprocess.CompletedProcess[str]:
        """Run in the foreground to its exit: (exit code, what ``kubectl logs`` would show)."""
        return subprocess.run(
            self.argv,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def state(self) -> JSON:
        out = self.engines.run(self.engines.podman("inspect", self.name), f"podman inspect {self.name}")
        state: JSON = json.loads(out)[0]["State"]
        return state

    def logs(self) -> str:
        done = subprocess.run(
            self.engines.podman("logs", self.name), capture_output=True, text=True, timeout=60, check=False
        )
        return done.stdout + done.stderr

    def stop(self) -> JSON:
        """SIGTERM, then SIGKILL after terminationGracePeriodSeconds, as the kubelet does."""
        self.engines.run(
            self.engines.podman("stop", "--time", str(self.grace), self.name),
            f"podman stop {self.name}",
            timeout=self.grace + 60,
        )
        return self.state()

    def exec(self, *command: str) -> str:
        return self.engines.run(self.engines.podman("exec", self.name, *command), f"podman exec {self.name}")

    def diff(self) -> list[str]:
        out = self.engines.run(self.engines.podman("diff", self.name), f"podman diff {self.name}")
        return [line for line in out.splitlines() if line.strip()]

    def remove(self) -> None:
        subprocess.run(
            self.engines.podman("rm", "--force", "--time", "5", self.name), capture_output=True, check=False
        )

    async def probe(self, path: str) -> httpx.Response | None:
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                return await client.get(f"http://127.0.0.1:{self.admin_port}{path}")
        except httpx.HTTPError:
            return None

    async def role(self) -> str | None:
        """``leader``/``standby`` once ``/readyz`` answers 200 (what the readiness probe sees)."""
        assert self.state()["Running"], self.logs()[-3000:]
        response = await self.probe("/readyz")
        if response is None or response.status_code != 200:
            return None
        return str(response.json().get("role") or "leader")


def pod_flags(spec: JSON, config: Path) -> list[str]:
    """podman flags for what the pod spec asks of the container runtime (its securityContext and
    its volumes: the config ConfigMap as ``config``, each emptyDir a tmpfs of its size), read
    from the rendered Deployment rather than restated. A field this does not know fails here."""
    (container,) = spec["containers"]
    pod_sc, sc = spec["securityContext"], container["securityContext"]
    assert pod_sc["runAsNonRoot"] and sc["allowPrivilegeEscalation"] is False
    flags = [*ULIMITS, "--user", f"{pod_sc['runAsUser']}:{pod_sc['runAsGroup']}"]
    flags += ["--group-add", str(pod_sc["fsGroup"])]
    flags += ["--security-opt", "no-new-privileges"]
    flags += [f"--cap-drop={cap}" for cap in sc["capabilities"]["drop"]]
    if sc["readOnlyRootFilesystem"]:
        flags += ["--read-only", "--read-only-tmpfs=false"]  # only the volumes below are writable
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in container["volumeMounts"]:
        volume, path = volumes[mount["name"]], mount["mountPath"]
        if "emptyDir" in volume:
            size = str(volume["emptyDir"]["sizeLimit"]).replace("Mi", "m")
            flags += ["--tmpfs", f"{path}:rw,size={size},mode=1777"]
        else:
            assert "configMap" in volume and mount["name"] == "config", f"a volume to learn: {volume}"
            flags += ["--volume", f"{config}:{path}:ro"]
    return flags


def pod_env(spec: JSON, *, pod_ip: str, pod_name: str) -> list[str]:
    """The container's ``env`` as the kubelet resolves it (``status.podIP``, ``metadata.name``);
    ``envFrom``'s Secret is optional and absent here, as the demo overlay has no key."""
    (container,) = spec["containers"]
    fields = {"status.podIP": pod_ip, "metadata.name": pod_name}
    flags = []
    for var in container.get("env") or []:
        value = var["value"] if "value" in var else fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
        flags += ["--env", f"{var['name']}={value}"]
    assert all(source["secretRef"]["optional"] for source in container.get("envFrom") or [])
    return flags


def is_mount_point(path: str, mounts: list[str]) -> bool:
    """``path`` is a mount target, or a directory the runtime created to hold one: podman diff
    lists those, though the container wrote nothing (its root is read-only)."""
    return any(m == path or m.startswith(path.rstrip("/") + "/") for m in mounts)


def probe_paths(spec: JSON) -> dict[str, str]:
    (container,) = spec["containers"]
    return {
        kind: container[kind]["httpGet"]["path"]
        for kind in ("livenessProbe", "readinessProbe", "startupProbe")
    }


@pytest.fixture(scope="module")
def kubelet(image: str, pod_spec: JSON, cluster: Cluster, service_account: Path) -> Kubelet:
    api_port = int(cluster.server.rsplit(":", 1)[1])
    net = cluster.kubelet_net
    pod_ip = net.host_ip if net is not None else "127.0.0.1"
    return Kubelet(image, pod_spec, service_account, api_port, pod_ip, net is not None)


@pytest.fixture(scope="module")
async def leader(
    kubelet: Kubelet,
    admin: KubeClient,
    clouds: dict[str, Any],
    demo: list[JSON],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Container]:
    """The first replica, running, Ready and leading."""
    replica = Container(kubelet, config_dir(demo, clouds, tmp_path_factory.mktemp("config")))
    replica.start()
    try:
        assert await eventually(replica.role, timeout=120) == "leader"
        yield replica
    finally:
        replica.remove()


async def test_in_cluster_configuration_registers_the_node(
    leader: Container, kubelet: Kubelet, cluster: Cluster, admin: KubeClient
) -> None:
    """No kubeconfig anywhere in the container: the ServiceAccount's token, found in-cluster,
    registers the virtual node (the audit log names the ServiceAccount as the creator)."""

    async def ready() -> JSON | None:
        node = await admin.request("GET", f"/api/v1/nodes/{NODE}")
        for cond in node["status"].get("conditions") or []:
            if cond["type"] == "Ready" and cond["status"] == "True":
                return dict(node)
        return None

    node = await eventually(ready, timeout=90)
    assert node["status"]["addresses"][0]["address"] == kubelet.pod_ip
    assert cluster.audit_log is not None
    created = {a for a in accesses(read_events(cluster.audit_log), USER) if a.verb == "create"}
    assert any(a.resource == "nodes" for a in created), created
    logs = leader.logs()
    assert "kubeconfig" not in logs.lower() and "Traceback" not in logs, logs[-3000:]
    print(f"\nnode {NODE} Ready, created by {USER}; {len(created)} kinds of create in the audit log")


async def test_a_pod_goes_running_and_is_deleted(
    leader: Container, admin: KubeClient, clouds: dict[str, Any]
) -> None:
    pods = f"/api/v1/namespaces/{SERVED}/pods"
    name = f"gpu-{uuid.uuid4().hex[:6]}"
    await admin.request("POST", pods, body=bound_gpu_pod(name, NODE))

    async def running() -> JSON | None:
        pod = await admin.request("GET", f"{pods}/{name}")
        return dict(pod) if pod["status"].get("phase") == "Running" else None

    pod = await eventually(running, timeout=120)
    placed = str(pod["metadata"].get("annotations"))
    provider = next(p for p in clouds if p in placed)
    assert len(clouds[provider].store.deployments) == 1
    await admin.request("DELETE", f"{pods}/{name}")

    async def gone() -> bool:
        names = {p["metadata"]["name"] for p in (await admin.request("GET", pods))["items"]}
        return name not in names and not any(c.store.deployments for c in clouds.values())

    await eventually(gone, timeout=120)
    print(f"\npod {name}: Running on {provider}, deleted, its deployment gone")


async def test_the_probes_answer_as_the_deployment_expects(leader: Container, pod_spec: JSON) -> None:
    for kind, path in probe_paths(pod_spec).items():
        response = await leader.probe(path)
        assert response is not None and response.status_code == 200, (kind, path, response)
        print(f"\n{kind} GET {path}: {response.status_code} {response.text[:200]}")


async def test_kubectl_logs_reaches_the_kubelet_api_in_the_container(
    leader: Container, kubelet: Kubelet, cluster: Cluster, admin: KubeClient
) -> None:
    """``kubelet.csr``, as the overlay configures it: the container asks for its serving
    certificate with a kubelet-serving CSR; ``vkprovider approve-csr`` approves it (the pod IP
    given with ``--ip``: these containers are no pods it could list); the controller-manager signs
    it; then ``kubectl logs`` — the apiserver calling the kubelet API at the node's address with
    its client certificate, verified against the CA the Deployment names — reaches the fakecloud's
    log lines through the container."""
    if not kubelet.proxied:
        pytest.skip("the dev cluster has no kubelet network namespace (needs ip netns): no kubelet API")

    async def csr() -> JSON | None:
        listed = await admin.request(
            "GET",
            "/apis/certificates.k8s.io/v1/certificatesigningrequests",
            query={"labelSelector": f"vkprovider.io/node-name={NODE}"},
        )
        mine = [c for c in listed["items"] if c["spec"]["username"] == USER]
        return mine[0] if mine else None

    request = await eventually(csr, timeout=60)
    assert request["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
    approve = ["approve-csr", "--kubeconfig", str(cluster.kubeconfig), "--node", NODE, "--requester", USER]
    approve += ["--pod-selector", "app=none", "--ip", kubelet.pod_ip]
    assert await asyncio.to_thread(vkprovider_main, approve) == 0
    pods = f"/api/v1/namespaces/{SERVED}/pods"
    name = f"logs-{uuid.uuid4().hex[:6]}"
    await admin.request("POST", pods, body=bound_gpu_pod(name, NODE))
    try:

        async def started() -> str | None:
            done = await asyncio.to_thread(kubectl_result, cluster, "logs", "-n", SERVED, name)
            return done.stdout if done.returncode == 0 and "container server started" in done.stdout else None

        out = await eventually(started, timeout=120)
        print(f"\nCSR {request['metadata']['name']} approved; kubectl logs {name} ({kubelet.pod_ip}):\n{out}")
    finally:
        await admin.request("DELETE", f"{pods}/{name}")


async def test_a_bad_config_exits_2_with_one_line(
    kubelet: Kubelet, clouds: dict[str, Any], demo: list[JSON], tmp_path: Path
) -> None:
    replica = Container(kubelet, config_dir(demo, clouds, tmp_path / "config", pods__wokers=16))
    try:
        done = await asyncio.to_thread(replica.run)
    finally:
        replica.remove()
    output = (done.stdout + done.stderr).strip()
    print(f"\nexit {done.returncode}:\n{output}")
    assert done.returncode == 2, output
    problems = [line.strip() for line in output.splitlines() if line.startswith("  ")]
    assert len(problems) == 1 and problems[0].startswith("pods.wokers:"), output
    assert "Traceback" not in output


async def test_sigterm_hands_the_lease_over_and_nothing_is_written_outside_tmp(
    leader: Container,
    kubelet: Kubelet,
    admin: KubeClient,
    clouds: dict[str, Any],
    demo: list[JSON],
    tmp_path: Path,
) -> None:
    """A second replica stands by; SIGTERM to the leader (as the kubelet sends it): it releases
    the Lease and exits 0 before terminationGracePeriodSeconds (a SIGKILL would be 137), and
    the standby takes over. Neither wrote anything outside /tmp."""
    standby = Container(kubelet, config_dir(demo, clouds, tmp_path / "config"))
    standby.start()
    try:
        assert await eventually(standby.role, timeout=120) == "standby"
        writes = standby.exec("python", "-c", WRITE_PROBE)
        print(f"\nwrites as UID 10001: {writes}")
        assert json.loads(writes) == {"/tmp": "ok", "/opt/vkprovider": "EROFS", "/etc": "EROFS"}
        started = time.monotonic()
        state = await asyncio.to_thread(leader.stop)
        seconds = time.monotonic() - started
        logs = leader.logs()
        print(
            f"leader {leader.name} stopped in {seconds:.1f}s (grace {leader.grace}s): "
            f"exit {state['ExitCode']}, OOMKilled {state['OOMKilled']}"
        )
        assert state["ExitCode"] == 0, logs[-3000:]
        assert "released leadership" in logs, logs[-3000:]

        async def took_over() -> bool:
            return await standby.role() == "leader"

        await eventually(took_over, timeout=90)
        lease = await admin.request(
            "GET",
            f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/vkprovider-{NODE}",
        )
        assert lease["spec"]["holderIdentity"] == standby.name
        print(f"lease vkprovider-{NODE}: held by {standby.name}")
        for replica in (leader, standby):
            changed = replica.diff()
            print(f"podman diff {replica.name}: {changed or 'nothing'}")
            written = [line for line in changed if not is_mount_point(line.split(" ", 1)[1], replica.mounts)]
            assert not written, f"written outside the volumes: {written}"
    finally:
        standby.remove()


@pytest.fixture(autouse=True, scope="module")
def _no_container_left() -> Iterator[None]:
    yield
    if shutil.which("podman") is None:
        return
    engines = Engines.default()
    out = subprocess.run(
        engines.podman("ps", "--all", "--filter", "name=vkprovider-test-", "--format", "{{.Names}}"),
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert not out.strip(), f"containers left behind: {out}"
