"""The handful of core/v1 and coordination/v1 calls the service makes, as plain-dict functions.

Every path is built by ``api_path``, the one place a name becomes a URL segment: each segment is
checked by ``path_segment`` (client-go's ``IsValidPathSegmentName``) and percent-escaped, so a
name taken from a pod spec (``secretName: ../../kube-system/secrets/x``) raises
``InvalidObjectName`` instead of reading another namespace's object.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any
from urllib.parse import quote

from vkprovider.kube.client import JSON, MERGE_PATCH, STRATEGIC_PATCH, KubeClient
from vkprovider.kube.errors import InvalidObjectName, KubeNotFound

#: names that need no check beyond "not . or .." and no escaping (every DNS-1123 name)
_PLAIN = re.compile(r"[a-z0-9A-Z._-]+")


def path_segment(name: str, what: str = "name") -> str:
    """``name`` as one escaped URL path segment, or ``InvalidObjectName``.

    Refused as client-go refuses them: empty, ``.``, ``..``, or containing ``/`` or ``%`` (a
    ``%2F`` would be decoded by the apiserver into a separator). Anything else that is not plain
    (``?``, ``#``, spaces) is percent-escaped, so it can neither end the path nor start a query."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "%" in name:
        raise InvalidObjectName(str(name), what)
    if _PLAIN.fullmatch(name):
        return name
    return quote(name, safe="")


def api_path(
    resource: str,
    name: str = "",
    *,
    namespace: str = "",
    subresource: str = "",
    group: str = "",
    version: str = "v1",
) -> str:
    """``/api/v1[/namespaces/<ns>]/<resource>[/<name>[/<sub>]]`` (``/apis/<group>/<version>/…``
    for a group), every segment through ``path_segment``."""
    parts = (
        ["/api", path_segment(version)]
        if not group
        else ["/apis", path_segment(group, "group"), path_segment(version)]
    )
    if namespace:
        parts += ["namespaces", path_segment(namespace, "namespace")]
    parts.append(path_segment(resource, "resource"))
    if name:
        parts.append(path_segment(name))
        if subresource:
            parts.append(path_segment(subresource, "subresource"))
    elif subresource:
        raise InvalidObjectName("", "name")
    return "/".join(parts)


def pod_path(namespace: str, name: str) -> str:
    return api_path("pods", name, namespace=namespace)


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
    decode: bool | None = None,
) -> JSON | None:
    """Merge-patch ``status`` guarded by ``resourceVersion`` (a stale write gets 409, not a clobber).

    ``annotations`` go in the same patch (pods/status keeps metadata changes). The answer is
    decoded and returned only when ``decode`` (default: when there are annotations, so the
    caller can check they were kept); otherwise None: a pod's JSON is parsed for nothing on the
    busiest write path."""
    metadata: JSON = {"resourceVersion": resource_version}
    if annotations:
        metadata["annotations"] = annotations
    result: JSON | None = await kube.request(
        "PATCH",
        api_path("pods", name, namespace=namespace, subresource="status"),
        body={"metadata": metadata, "status": status},
        content_type=MERGE_PATCH,
        decode=bool(annotations) if decode is None else decode,
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
        cm: JSON = await kube.request("GET", api_path("configmaps", name, namespace=namespace))
    except KubeNotFound:
        return None
    return cm


async def get_secret(kube: KubeClient, namespace: str, name: str) -> JSON | None:
    try:
        secret: JSON = await kube.request("GET", api_path("secrets", name, namespace=namespace))
    except KubeNotFound:
        return None
    return secret


async def list_services(kube: KubeClient, namespace: str) -> list[JSON]:
    body = await kube.request("GET", api_path("services", namespace=namespace))
    return list(body.get("items") or [])


def endpoint_slice_path(namespace: str, name: str = "") -> str:
    return api_path("endpointslices", name, namespace=namespace, group="discovery.k8s.io")


async def create_endpoint_slice(kube: KubeClient, endpoint_slice: JSON) -> JSON:
    """POST; returns the slice as stored (its ``resourceVersion`` is what a next PUT needs)."""
    namespace = endpoint_slice["metadata"]["namespace"]
    stored: JSON = await kube.request("POST", endpoint_slice_path(namespace), body=endpoint_slice)
    return stored


async def replace_endpoint_slice(kube: KubeClient, endpoint_slice: JSON) -> JSON:
    """PUT guarded by ``metadata.resourceVersion`` (a stale copy gets 409, never a clobber);
    returns the slice as stored."""
    meta = endpoint_slice["metadata"]
    stored: JSON = await kube.request(
        "PUT", endpoint_slice_path(meta["namespace"], meta["name"]), body=endpoint_slice
    )
    return stored


async def delete_endpoint_slice(kube: KubeClient, namespace: str, name: str) -> None:
    with contextlib.suppress(KubeNotFound):
        await kube.request("DELETE", endpoint_slice_path(namespace, name), decode=False)


async def get_node(kube: KubeClient, name: str) -> JSON | None:
    try:
        node: JSON = await kube.request("GET", api_path("nodes", name))
    except KubeNotFound:
        return None
    return node


async def create_node(kube: KubeClient, node: JSON) -> JSON:
    created: JSON = await kube.request("POST", api_path("nodes"), body=node)
    return created


async def patch_node(kube: KubeClient, name: str, patch: JSON) -> JSON:
    result: JSON = await kube.request(
        "PATCH", api_path("nodes", name), body=patch, content_type=STRATEGIC_PATCH
    )
    return result


async def patch_node_status(kube: KubeClient, name: str, status: JSON) -> JSON:
    """Strategic merge: conditions merge by ``type``, so conditions other writers own survive."""
    result: JSON = await kube.request(
        "PATCH",
        api_path("nodes", name, subresource="status"),
        body={"status": status},
        content_type=STRATEGIC_PATCH,
    )
    return result


def lease_path(namespace: str, name: str = "") -> str:
    return api_path("leases", name, namespace=namespace, group="coordination.k8s.io")


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
    await kube.request("POST", api_path("events", namespace=namespace), body=event, decode=False)


async def patch_event(kube: KubeClient, namespace: str, name: str, patch: dict[str, Any]) -> None:
    await kube.request(
        "PATCH",
        api_path("events", name, namespace=namespace),
        body=patch,
        content_type=MERGE_PATCH,
        decode=False,
    )
