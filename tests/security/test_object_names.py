"""Attack: a pod names another namespace's Secret through a traversal name (issue 21, item 1).

A pod in ``team-a`` with ``secretName: ../../kube-system/secrets/x`` used to make the service GET
``/api/v1/namespaces/kube-system/secrets/x`` with its cluster-wide rights. Names are now refused
twice: translation checks every referenced name (DNS-1123) before any read and names the field;
``api_path`` refuses any name that is not a valid path segment, for every caller.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from vkprovider.errors import InvalidRequest
from vkprovider.kube import resources
from vkprovider.kube.client import resource_of
from vkprovider.kube.errors import InvalidObjectName
from vkprovider.pods.objects import ApiObjectSource
from vkprovider.translate import translate_pod
from vkprovider.translate.names import is_dns_subdomain

TRAVERSAL = "../../kube-system/secrets/x"


class RecordingSource:
    """An ``ObjectSource`` that records every read and holds one real secret."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        self.calls.append(("configmap", namespace, name))
        return {"k": "v"} if name == "good" else None

    async def get_secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        self.calls.append(("secret", namespace, name))
        return {"k": b"v"} if name == "good" else None

    async def list_services(self, namespace: str) -> list[Mapping[str, Any]]:
        self.calls.append(("services", namespace, ""))
        return []


class RecordingKube:
    """Stands in for ``KubeClient``: records each request; answers 404."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> Any:
        from vkprovider.kube.errors import KubeNotFound

        self.paths.append(path)
        raise KubeNotFound(404, "not found")


POD: dict[str, Any] = {
    "metadata": {"name": "attacker", "namespace": "team-a", "uid": "u-1"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}


def _pod(spec: dict[str, Any] | None = None, **container: Any) -> dict[str, Any]:
    pod = copy.deepcopy(POD)
    pod["spec"].update(spec or {})
    pod["spec"]["containers"][0].update(container)
    return pod


# ---------------------------------------------------------------- path_segment / api_path


@pytest.mark.parametrize("name", ["", ".", "..", TRAVERSAL, "a/b", "x%2F..%2Fy", "%2e%2e"])
def test_path_segment_refuses_names_that_are_not_one_segment(name: str) -> None:
    with pytest.raises(InvalidObjectName):
        resources.path_segment(name)


def test_path_segment_escapes_query_and_fragment_characters() -> None:
    assert resources.path_segment("a?watch=true#b c") == "a%3Fwatch%3Dtrue%23b%20c"
    assert resources.path_segment("llm-0.web") == "llm-0.web"


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"resource": "secrets", "name": "s", "namespace": "ns"}, "/api/v1/namespaces/ns/secrets/s"),
        (
            {"resource": "pods", "name": "p", "namespace": "ns", "subresource": "status"},
            "/api/v1/namespaces/ns/pods/p/status",
        ),
        ({"resource": "nodes", "name": "vk"}, "/api/v1/nodes/vk"),
        ({"resource": "events", "namespace": "ns"}, "/api/v1/namespaces/ns/events"),
        (
            {"resource": "leases", "name": "l", "namespace": "ns", "group": "coordination.k8s.io"},
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
        ),
    ],
)
def test_api_path_builds_the_paths_the_service_uses(kwargs: dict[str, str], path: str) -> None:
    assert resources.api_path(**kwargs) == path  # type: ignore[arg-type]


@pytest.mark.parametrize("where", ["name", "namespace"])
def test_api_path_refuses_a_traversal_name_or_namespace(where: str) -> None:
    kwargs = {"name": "s", "namespace": "team-a", where: TRAVERSAL}
    with pytest.raises(InvalidObjectName):
        resources.api_path("secrets", **kwargs)


async def test_get_secret_with_a_traversal_name_sends_no_request() -> None:
    kube = RecordingKube()
    with pytest.raises(InvalidObjectName):
        await resources.get_secret(kube, "team-a", TRAVERSAL)  # type: ignore[arg-type]
    with pytest.raises(InvalidObjectName):
        await resources.get_config_map(kube, "team-a", "..")  # type: ignore[arg-type]
    assert kube.paths == []


async def test_api_object_source_fails_the_pod_for_a_bad_name_instead_of_retrying() -> None:
    kube = RecordingKube()
    source = ApiObjectSource(kube)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest) as caught:
        await source.get_secret("team-a", TRAVERSAL)
    assert caught.value.reason == "InvalidPodSpec"
    assert kube.paths == []


def test_metric_resource_labels_are_a_fixed_set() -> None:
    assert resource_of("/api/v1/namespaces/ns/pods/p/status") == "pods/status"
    assert resource_of("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l") == "leases"
    assert resource_of("/api/v1/namespaces/team-a/secrets/../../kube-system/secrets/x") == "other"
    assert resource_of("/api/v1/namespaces/ns/attacker-chosen-label") == "other"
    assert resource_of("/api/v1/nodes/n/attacker") == "other"


# ---------------------------------------------------------------- translation


def test_dns_subdomain() -> None:
    assert is_dns_subdomain("db-creds.v2")
    for bad in ("", TRAVERSAL, "..", "UPPER", "-x", "x-", "a" * 254, "a_b", "a%2fb"):
        assert not is_dns_subdomain(bad), bad


REFUSED: list[tuple[dict[str, Any], str]] = [
    (
        _pod({"volumes": [{"name": "v", "secret": {"secretName": TRAVERSAL}}]}),
        "spec.volumes[0].secret.secretName",
    ),
    (
        _pod({"volumes": [{"name": "v", "configMap": {"name": "../../kube-system/configmaps/c"}}]}),
        "spec.volumes[0].configMap.name",
    ),
    (
        _pod(
            {
                "volumes": [
                    {"name": "ok", "secret": {"secretName": "good"}},
                    {
                        "name": "p",
                        "projected": {
                            "sources": [{"configMap": {"name": "good"}}, {"secret": {"name": TRAVERSAL}}]
                        },
                    },
                ]
            }
        ),
        "spec.volumes[1].projected.sources[1].secret.name",
    ),
    (
        _pod(envFrom=[{"secretRef": {"name": TRAVERSAL}}]),
        "spec.containers[0].envFrom[0].secretRef.name",
    ),
    (
        _pod(envFrom=[{"configMapRef": {"name": "good"}}, {"configMapRef": {"name": ".."}}]),
        "spec.containers[0].envFrom[1].configMapRef.name",
    ),
    (
        _pod(env=[{"name": "X", "valueFrom": {"secretKeyRef": {"name": TRAVERSAL, "key": "k"}}}]),
        "spec.containers[0].env[0].valueFrom.secretKeyRef.name",
    ),
    (
        _pod(env=[{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "a/b", "key": "k"}}}]),
        "spec.containers[0].env[0].valueFrom.configMapKeyRef.name",
    ),
    (
        _pod(
            {"initContainers": [{"name": "i", "image": "b", "envFrom": [{"secretRef": {"name": "%2e%2e"}}]}]}
        ),
        "spec.initContainers[0].envFrom[0].secretRef.name",
    ),
]


@pytest.mark.parametrize(("pod", "field"), REFUSED, ids=[field for _, field in REFUSED])
async def test_a_traversal_reference_fails_the_pod_naming_the_field_before_any_read(
    pod: dict[str, Any], field: str
) -> None:
    source = RecordingSource()
    with pytest.raises(InvalidRequest) as caught:
        await translate_pod(pod, node_name="vk", source=source)
    assert caught.value.reason == "InvalidPodSpec"
    assert caught.value.message.startswith(f"{field}: ")
    assert source.calls == []  # not even the pod's own namespace was read


async def test_a_traversal_pull_secret_is_skipped_with_the_kubelets_warning() -> None:
    pod = _pod({"imagePullSecrets": [{"name": TRAVERSAL}, {"name": "good"}]})
    source = RecordingSource()
    translation = await translate_pod(pod, node_name="vk", source=source)
    assert [c for c in source.calls if c[0] == "secret"] == [("secret", "team-a", "good")]
    reasons = [(w.reason, w.message.split(":")[0]) for w in translation.warnings]
    assert ("FailedToRetrieveImagePullSecret", "spec.imagePullSecrets[0].name") in reasons


async def test_valid_references_are_read_in_the_pods_namespace_only() -> None:
    pod = _pod(
        {
            "volumes": [{"name": "v", "secret": {"secretName": "good"}}],
            "imagePullSecrets": [{"name": "good"}],
        },
        envFrom=[{"configMapRef": {"name": "good"}}],
    )
    source = RecordingSource()
    await translate_pod(pod, node_name="vk", source=source)
    assert {namespace for _, namespace, _ in source.calls} == {"team-a"}
