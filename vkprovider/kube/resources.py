"""The handful of core/v1 and coordination/v1 calls the service makes, as plain-dict functions."""

from __future__ import annotations

import contextlib
from typing import Any

from vkprovider.kube.client import JSON, MERGE_PATCH, STRATEGIC_PATCH, KubeClient
from vkprovider.kube.errors import KubeNotFound


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


async def get_pod(kube: KubeClient, namespace: str, name: str) -> JSON | None:
    try:
        pod: JSON = await kube.request("GET", pod_path(namespace, name))
    except KubeNotFound:
        return None
    return pod


async def patch_pod_status(
    kube: KubeClient,
    namespace: str,
    name: str,
    status: JSON,
    resource_version: str,
    *,
    annotations: dict[str, str] | None = None,
) -> JSON | None:
    """Merge-patch ``status`` guarded by ``resourceVersion`` (a stale write gets 409, not a clobber).

    ``annotations`` go in the same patch (pods/status keeps metadata changes); only then is the
    answer decoded and returned, so the caller can check they were kept. Otherwise None: a
    pod's JSON is parsed for nothing on the busiest write path."""
    metadata: JSON = {"resourceVersion": resource_version}
    if annotations:
        metadata["annotations"] = annotations
    result: JSON | None = await kube.request(
        "PATCH",
        pod_path(namespace, name) + "/status",
        body={"metadata": metadata, "status": status},
        content_type=MERGE_PATCH,
        decode=bool(annotations),
    )
    return result


async def patch_pod_annotations(
    kube: KubeClient, namespace: str, name: str, annotations: dict[str, str]
) -> JSON:
    """Merge-patch annotations; returns the patched pod (its resourceVersion saves a 409 later)."""
    result: JSON = await kube.request(
        "PATCH",
        pod_path(namespace, name),
        body={"metadata": {"annotations": annotations}},
        content_type=MERGE_PATCH,
    )
    return result


async def delete_pod_now(kube: KubeClient, namespace: str, name: str, uid: str) -> None:
    """Delete with grace 0 and a UID precondition, so a same-named successor pod is never hit."""
    body = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": uid},
    }
    with contextlib.suppress(KubeNotFound):
        await kube.request("DELETE", pod_path(namespace, name), body=body, decode=False)


async def get_config_map(kube: KubeClient, namespace: str, name: str) -> JSON | None:
    try:
        cm: JSON = await kube.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    except KubeNotFound:
        return None
    return cm


async def get_secret(kube: KubeClient, namespace: str, name: str) -> JSON | None:
    try:
        secret: JSON = await kube.request("GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
    except KubeNotFound:
        return None
    return secret


async def list_services(kube: KubeClient, namespace: str) -> list[JSON]:
    body = await kube.request("GET", f"/api/v1/namespaces/{namespace}/services")
    return list(body.get("items") or [])


async def get_node(kube: KubeClient, name: str) -> JSON | None:
    try:
        node: JSON = await kube.request("GET", f"/api/v1/nodes/{name}")
    except KubeNotFound:
        return None
    return node


async def create_node(kube: KubeClient, node: JSON) -> JSON:
    created: JSON = await kube.request("POST", "/api/v1/nodes", body=node)
    return created


async def patch_node(kube: KubeClient, name: str, patch: JSON) -> JSON:
    result: JSON = await kube.request(
        "PATCH", f"/api/v1/nodes/{name}", body=patch, content_type=STRATEGIC_PATCH
    )
    return result


async def patch_node_status(kube: KubeClient, name: str, status: JSON) -> JSON:
    """Strategic merge: conditions merge by ``type``, so conditions other writers own survive."""
    result: JSON = await kube.request(
        "PATCH", f"/api/v1/nodes/{name}/status", body={"status": status}, content_type=STRATEGIC_PATCH
    )
    return result


def lease_path(namespace: str, name: str = "") -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{base}/{name}" if name else base


async def get_lease(kube: KubeClient, namespace: str, name: str) -> JSON | None:
    try:
        lease: JSON = await kube.request("GET", lease_path(namespace, name))
    except KubeNotFound:
        return None
    return lease


async def create_lease(kube: KubeClient, lease: JSON) -> JSON:
    created: JSON = await kube.request("POST", lease_path(lease["metadata"]["namespace"]), body=lease)
    return created


async def replace_lease(kube: KubeClient, lease: JSON) -> JSON:
    """PUT carrying the read resourceVersion: a concurrent writer makes this a 409."""
    meta = lease["metadata"]
    replaced: JSON = await kube.request("PUT", lease_path(meta["namespace"], meta["name"]), body=lease)
    return replaced


async def create_event(kube: KubeClient, namespace: str, event: dict[str, Any]) -> None:
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/events", body=event, decode=False)


async def patch_event(kube: KubeClient, namespace: str, name: str, patch: dict[str, Any]) -> None:
    await kube.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/events/{name}",
        body=patch,
        content_type=MERGE_PATCH,
        decode=False,
    )
