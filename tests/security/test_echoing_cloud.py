"""Attack: a cloud that quotes its input in errors leaks Secret values (issue 21, item 6).

The fakecloud's ``echo_input`` knob refuses every create with a 422 that quotes the request's
environment values, file contents (base64) and registry credentials. The adapter hands that
message on as it must; the guard scrubs it. Unit: the real adapter against a real fakecloud on
127.0.0.1. Cluster: a pod using a Secret three ways (env, volume, pull secret) on the dev
cluster — none of the values in the pod's status, its Events, the service log, ``/metrics`` or
``/state``, while the (scrubbed) refusal itself is shown.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import generate_latest
from vkprovider_fakecloud.adapter import FakeCloudProvider
from vkprovider_fakecloud.server import FakeCloudServer, running_fakecloud

from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.errors import InvalidRequest
from vkprovider.http.state import operator_state
from vkprovider.models import Container, DeploymentRequest, EnvVar, FileMount, RegistryCredential
from vkprovider.plugins.guard import guard
from vkprovider.plugins.scrub import REDACTED
from vkprovider.sim.local import VirtualNode, cloud_config, start_virtual_node

JSON = dict[str, Any]
ENV_VALUE = "env-secret-Qx7-hunter2"
FILE_VALUE = "file-secret-Zr9-tls-key"
PULL_PASSWORD = "pull-secret-Kp4-token"


def leaks(text: str) -> list[str]:
    """Every form of a secret value found in ``text``."""
    forms = [ENV_VALUE, FILE_VALUE, PULL_PASSWORD]
    forms += [base64.b64encode(v.encode()).decode().rstrip("=") for v in forms]
    forms.append(base64.b64encode(f"puller:{PULL_PASSWORD}".encode()).decode().rstrip("="))
    return [form for form in forms if form in text]


# ---------------------------------------------------------------- unit: real adapter, real server


@pytest.fixture
async def echoing() -> AsyncIterator[FakeCloudServer]:
    config = cloud_config("echo", 1.0)
    async with running_fakecloud(config) as server:
        server.store.knobs = server.store.knobs.model_copy(update={"echo_input": True})
        yield server


def secret_request() -> DeploymentRequest:
    container = Container(
        name="c",
        image="busybox",
        env=[EnvVar(name="TOKEN", value=ENV_VALUE, secret=True), EnvVar(name="MODE", value="plain-mode")],
        files=[FileMount(path="/etc/key", content=FILE_VALUE.encode(), secret=True)],
    )
    return DeploymentRequest(
        uid="uid-echo",
        namespace="team-a",
        name="p",
        node_name="vk",
        containers=[container],
        registry_credentials=[RegistryCredential(server="r.io", username="puller", password=PULL_PASSWORD)],
    )


async def test_the_echoing_cloud_does_echo_through_a_bare_adapter(echoing: FakeCloudServer) -> None:
    """The premise: without the guard, the adapter's error carries every secret value."""
    adapter = FakeCloudProvider("echo", FakeCloudProvider.Settings(url=echoing.url, timeout_seconds=5.0))
    try:
        with pytest.raises(InvalidRequest) as caught:
            await adapter.deploy(secret_request())
    finally:
        await adapter.close()
    assert len(leaks(str(caught.value))) >= 3


async def test_the_guard_hands_on_the_refusal_without_secret_values(
    echoing: FakeCloudServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    adapter = FakeCloudProvider("echo", FakeCloudProvider.Settings(url=echoing.url, timeout_seconds=5.0))
    provider = guard(adapter)
    try:
        with pytest.raises(InvalidRequest) as caught:
            await provider.deploy(secret_request())
    finally:
        await provider.close()
    message = str(caught.value)
    assert leaks(message) == []
    assert REDACTED in message and "TOKEN=" in message and "plain-mode" in message
    assert leaks(caplog.text) == []


# ---------------------------------------------------------------- cluster: the whole pod path


@pytest.fixture
async def vnode(cluster: Cluster) -> AsyncIterator[VirtualNode]:
    node = await start_virtual_node(cluster, {"echo": cloud_config("echo", 1.0, capacity=4)})
    store = node.clouds["echo"].store
    store.knobs = store.knobs.model_copy(update={"echo_input": True})
    yield node
    await node.stop()


def pod_manifest(node: str) -> JSON:
    return {
        "metadata": {"name": "leaky"},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [{"name": "key", "secret": {"secretName": "app"}}],
            "containers": [
                {
                    "name": "server",
                    "image": "registry.example/llm-server:1.0",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    "env": [
                        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "app", "key": "token"}}}
                    ],
                    "volumeMounts": [{"name": "key", "mountPath": "/etc/app"}],
                }
            ],
        },
    }


@pytest.mark.cluster
async def test_secret_values_never_reach_status_events_logs_metrics_or_state(
    vnode: VirtualNode, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    kube = vnode.kube
    assert kube is not None and vnode.placer is not None and vnode.controller is not None
    caplog.set_level(logging.DEBUG)
    docker = {"auths": {"registry.example": {"username": "puller", "password": PULL_PASSWORD}}}
    secrets = [
        {"metadata": {"name": "app"}, "stringData": {"token": ENV_VALUE, "key.pem": FILE_VALUE}},
        {
            "metadata": {"name": "pull"},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": json.dumps(docker)},
        },
    ]
    for secret in secrets:
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/secrets", body=secret)
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod_manifest(vnode.name))

    async def failed() -> JSON | None:
        pod: JSON = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/leaky")
        return pod if (pod.get("status") or {}).get("phase") == "Failed" else None

    pod = await eventually(failed)
    status = json.dumps(pod["status"])
    assert REDACTED in status  # the refusal is shown, its secret values are not
    assert leaks(status) == []

    async def events() -> list[JSON] | None:
        body = await kube.request("GET", f"/api/v1/namespaces/{namespace}/events")
        items = list(body["items"])
        return items if any(REDACTED in e.get("message", "") for e in items) else None

    assert leaks(json.dumps(await eventually(events))) == []
    assert leaks(caplog.text) == []
    assert leaks(generate_latest().decode()) == []
    assert leaks(json.dumps(operator_state(vnode.placer, vnode.controller), default=str)) == []
