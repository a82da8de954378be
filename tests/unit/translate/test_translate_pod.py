"""Pod-level translation: shape, GPUs, resources, credentials, volumes and refusals."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from vkprovider.errors import InvalidRequest
from vkprovider.models import FileMount
from vkprovider.translate import Translation, translate_pod

PodFactory = Callable[..., dict[str, Any]]


async def _translate(pod: dict[str, Any], source: Any, **kwargs: Any) -> Translation:
    return await translate_pod(pod, node_name="vk-external", source=source, **kwargs)


async def test_basic_shape(pod: PodFactory, source: Any) -> None:
    p = pod(
        command=["python", "-m", "serve"],
        args=["--port", "8000"],
        workingDir="/app",
        ports=[{"containerPort": 8000, "name": "http"}, {"containerPort": 9000, "protocol": "UDP"}],
        spec={"restartPolicy": "OnFailure"},
    )
    request = (await _translate(p, source)).request
    assert (request.uid, request.namespace, request.name, request.node_name) == (
        "0b9c7a1e-1111-2222-3333-444455556666",
        "serving",
        "llm-0",
        "vk-external",
    )
    (container,) = request.containers
    assert container.image == "ghcr.io/acme/llm:1.2"
    assert (container.command, container.args, container.working_dir) == (
        ["python", "-m", "serve"],
        ["--port", "8000"],
        "/app",
    )
    assert [(p.container_port, p.protocol, p.name) for p in container.ports] == [
        (8000, "TCP", "http"),
        (9000, "UDP", ""),
    ]
    assert (container.cpu, container.memory_bytes) == (2.0, 8 * 1024**3)
    assert request.restart_policy == "OnFailure"
    assert request.labels == {"app": "llm", "tier": "gpu"}
    assert request.tags()["vkprovider.io/pod-uid"] == request.uid


async def test_requests_default_to_limits(pod: PodFactory, source: Any) -> None:
    p = pod(resources={"limits": {"cpu": "500m", "memory": "129M", "nvidia.com/gpu": 2}})
    request = (await _translate(p, source)).request
    assert (request.containers[0].cpu, request.containers[0].memory_bytes, request.gpu_count) == (
        0.5,
        129_000_000,
        2,
    )


async def test_gpu_count_sums_containers_and_respects_init_max(pod: PodFactory, source: Any) -> None:
    sidecar = {"name": "side", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    init = {"name": "warm", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
    p = pod(spec={"initContainers": [init]})
    p["spec"]["containers"].append(sidecar)
    request = (await _translate(p, source)).request
    assert request.gpu_count == 4
    assert [c.name for c in request.init_containers] == ["warm"]
    p["spec"]["initContainers"] = []
    assert (await _translate(p, source)).request.gpu_count == 2


async def test_custom_gpu_resource_name(pod: PodFactory, source: Any) -> None:
    p = pod(resources={"limits": {"amd.com/gpu": "3"}})
    assert (await _translate(p, source, gpu_resource="amd.com/gpu")).request.gpu_count == 3
    assert (await _translate(p, source)).request.gpu_count == 0


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"metadata": {"annotations": {"vkprovider.io/gpu-type": "H100_SXM"}}}, "H100-SXM-80GB"),
        ({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}}, "A100-SXM-80GB"),
        ({"spec": {"nodeSelector": {"gpu-type": "RTX 4090"}}}, "RTX-4090-24GB"),
        (
            {
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "zone", "operator": "In", "values": ["a"]},
                                            {
                                                "key": "nvidia.com/gpu.product",
                                                "operator": "In",
                                                "values": ["L40S"],
                                            },
                                        ]
                                    }
                                ]
                            }
                        }
                    }
                }
            },
            "L40S-48GB",
        ),
        ({}, None),
    ],
)
async def test_gpu_type_sources(
    pod: PodFactory, source: Any, extra: dict[str, Any], expected: str | None
) -> None:
    request = (await _translate(pod(**extra), source)).request
    assert request.gpu_type == expected
    assert (request.gpu_memory_gb > 0) == (expected is not None)


async def test_annotation_beats_node_selector(pod: PodFactory, source: Any) -> None:
    p = pod(
        metadata={"annotations": {"vkprovider.io/gpu-type": "T4"}},
        spec={"nodeSelector": {"nvidia.com/gpu.product": "H100"}},
    )
    assert (await _translate(p, source)).request.gpu_type == "T4-16GB"


async def test_image_pull_secrets(pod: PodFactory, source_cls: Any) -> None:
    auth = base64.b64encode(b"bob:tok3n").decode()
    dockerconfig = {
        "auths": {"ghcr.io": {"auth": auth}, "registry.example": {"username": "u", "password": "p"}}
    }
    source = source_cls(
        secrets={
            "ghcr": {".dockerconfigjson": json.dumps(dockerconfig).encode()},
            "legacy": {
                ".dockercfg": json.dumps({"quay.io": {"auth": base64.b64encode(b"q:w").decode()}}).encode()
            },
            "broken": {".dockerconfigjson": b"{not json"},
        }
    )
    names = ["ghcr", "legacy", "broken", "absent"]
    t = await _translate(pod(spec={"imagePullSecrets": [{"name": n} for n in names]}), source)
    creds = [(c.server, c.username, c.password) for c in t.request.registry_credentials]
    assert creds == [("ghcr.io", "bob", "tok3n"), ("registry.example", "u", "p"), ("quay.io", "q", "w")]
    assert [w.reason for w in t.warnings] == ["FailedToRetrieveImagePullSecret"] * 2
    assert "tok3n" not in repr(t)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p["spec"].update(hostNetwork=True), "spec.hostNetwork"),
        (lambda p: p["spec"].update(hostPID=True), "spec.hostPID"),
        (lambda p: p["spec"].update(hostIPC=True), "spec.hostIPC"),
        (
            lambda p: p["spec"]["containers"][0].update(securityContext={"privileged": True}),
            "spec.containers[0].securityContext.privileged",
        ),
        (
            lambda p: p["spec"].update(
                volumes=[
                    {"name": "a", "emptyDir": {}},
                    {"name": "b", "emptyDir": {}},
                    {"name": "h", "hostPath": {"path": "/x"}},
                ]
            ),
            "spec.volumes[2].hostPath",
        ),
        (
            lambda p: p["spec"].update(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]),
            "spec.volumes[0].persistentVolumeClaim",
        ),
        (
            lambda p: p["spec"].update(ephemeralContainers=[{"name": "dbg", "image": "x"}]),
            "spec.ephemeralContainers",
        ),
        (
            lambda p: p["spec"]["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
            "spec.containers[0].ports[0].hostPort",
        ),
        (lambda p: p["spec"]["containers"][0].pop("image"), "spec.containers[0].image"),
        (lambda p: p["spec"].update(containers=[]), "spec.containers"),
        (lambda p: p["metadata"].pop("uid"), "metadata.uid"),
        (lambda p: p["spec"].update(restartPolicy="Sometimes"), "spec.restartPolicy"),
        (
            lambda p: p["spec"]["containers"][0].update(resources={"limits": {"nvidia.com/gpu": "0.5"}}),
            "spec.containers[0].resources.limits[nvidia.com/gpu]",
        ),
        (lambda p: p["spec"]["containers"][0].update(env="not-a-list"), "spec.containers[0].env"),
        (
            lambda p: p["spec"].update(
                initContainers=[{"name": "s", "image": "x", "restartPolicy": "Always"}]
            ),
            "spec.initContainers[0].restartPolicy",
        ),
    ],
)
async def test_unsupported_or_invalid_fields_are_named(
    pod: PodFactory, source: Any, mutate: Callable[[dict[str, Any]], Any], field: str
) -> None:
    p = pod()
    mutate(p)
    with pytest.raises(InvalidRequest) as info:
        await _translate(p, source)
    assert info.value.message.startswith(field + ":"), info.value.message


def _kube_api_access() -> dict[str, Any]:
    """What the ServiceAccount admission controller injects into every pod."""
    return {
        "name": "kube-api-access-x7k2p",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }


async def test_service_account_volume_is_ignored(pod: PodFactory, source: Any) -> None:
    mount = {
        "name": "kube-api-access-x7k2p",
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        "readOnly": True,
    }
    t = await _translate(pod(volumeMounts=[mount], spec={"volumes": [_kube_api_access()]}), source)
    assert t.request.containers[0].files == []
    assert t.warnings == []
    assert source.calls == [("services", "serving", "")]  # kube-root-ca.crt was not even looked up


async def test_config_secret_projected_and_empty_dir_volumes(pod: PodFactory, source_cls: Any) -> None:
    source = source_cls(
        config_maps={"cfg": {"app.yaml": "a: 1", "other": "x"}},
        secrets={"tls": {"tls.key": b"KEY", "tls.crt": b"CRT"}},
    )
    volumes = [
        {
            "name": "cfg",
            "configMap": {
                "name": "cfg",
                "items": [{"key": "app.yaml", "path": "conf/app.yaml", "mode": 0o600}],
            },
        },
        {"name": "tls", "secret": {"secretName": "tls", "defaultMode": 0o400}},
        {
            "name": "both",
            "projected": {
                "sources": [
                    {"configMap": {"name": "cfg", "items": [{"key": "other", "path": "other.txt"}]}},
                    {
                        "downwardAPI": {
                            "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]
                        }
                    },
                ]
            },
        },
        {"name": "scratch", "emptyDir": {"medium": "Memory"}},
        {"name": "unmounted", "configMap": {"name": "cfg"}},
    ]
    mounts = [
        {"name": "cfg", "mountPath": "/etc/app"},
        {"name": "tls", "mountPath": "/tls/"},
        {"name": "both", "mountPath": "/etc/both"},
        {"name": "scratch", "mountPath": "/scratch"},
    ]
    t = await _translate(pod(volumeMounts=mounts, spec={"volumes": volumes}), source)
    files = {f.path: f for f in t.request.containers[0].files}
    assert files["/etc/app/conf/app.yaml"] == FileMount(
        path="/etc/app/conf/app.yaml", content=b"a: 1", mode=0o600
    )
    assert (files["/tls/tls.key"].content, files["/tls/tls.key"].mode, files["/tls/tls.key"].secret) == (
        b"KEY",
        0o400,
        True,
    )
    assert files["/etc/both/other.txt"].content == b"x"
    assert files["/etc/both/labels"].content == b'app="llm"\ntier="gpu"'
    assert "/scratch/" in files and files["/scratch/"].content == b""
    assert len(files) == 6
    assert "KEY" not in repr(t.request)


async def test_volume_refs_mandatory_optional_and_sub_path(pod: PodFactory, source_cls: Any) -> None:
    source = source_cls(config_maps={"cfg": {"a": "1"}})
    missing = [{"name": "v", "configMap": {"name": "gone"}}]
    with pytest.raises(InvalidRequest) as info:
        await _translate(pod(spec={"volumes": missing}), source)  # mandatory even when unmounted
    assert info.value.reason == "MandatoryConfigMapNotFound"
    missing_key = [{"name": "v", "configMap": {"name": "cfg", "items": [{"key": "b", "path": "b"}]}}]
    with pytest.raises(InvalidRequest) as info:
        await _translate(pod(spec={"volumes": missing_key}), source)
    assert info.value.reason == "MandatoryConfigMapKeyNotFound"
    optional = [{"name": "v", "secret": {"secretName": "gone", "optional": True}}]
    t = await _translate(
        pod(spec={"volumes": optional}, volumeMounts=[{"name": "v", "mountPath": "/s"}]), source
    )
    assert [w.reason for w in t.warnings] == ["OptionalSecretNotFound"]
    assert t.request.containers[0].files == []
    sub_path = [{"name": "v", "mountPath": "/etc/a", "subPath": "a"}]
    with pytest.raises(InvalidRequest, match=r"^spec\.containers\[0\]\.volumeMounts\[0\]\.subPath:"):
        await _translate(
            pod(spec={"volumes": [{"name": "v", "configMap": {"name": "cfg"}}]}, volumeMounts=sub_path),
            source,
        )
    escape = [{"name": "v", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "../etc/passwd"}]}}]
    with pytest.raises(InvalidRequest, match=r"items\[0\]\.path"):
        await _translate(pod(spec={"volumes": escape}), source)


async def test_nothing_is_read_when_the_pod_is_refused(pod: PodFactory, source: Any) -> None:
    p = pod(
        env=[{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        spec={"hostNetwork": True},
    )
    with pytest.raises(InvalidRequest, match="hostNetwork"):
        await _translate(p, source)
    assert source.calls == []
