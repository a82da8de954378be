"""DeploymentRequest → the remote Pod (and its companion Secrets), as plain JSON-able dicts.

Naming and identity:

* the remote pod is ``vk-<uid>`` in the configured namespace, so ``get(uid)`` is one read and a
  second create of the same UID is refused by the API server (409) — idempotency for free;
* labels ``vkprovider.io/pod-uid`` and ``vkprovider.io/node-name`` make ``list(node)`` one
  label-selector call; values that are not valid label values (too long, odd characters) are
  replaced by a stable hash, and the exact values are kept in annotations;
* secret env values, ConfigMap/Secret files and registry credentials go into Secrets named
  ``vk-<uid>`` / ``vk-<uid>-pull`` owned by the pod, so they are garbage-collected with it and
  never appear in the pod spec.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

from vkprovider.plugins.api import (
    LABEL_NODE_NAME,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    Container,
    DeploymentRequest,
)

from .settings import KubernetesSettings

ANNOTATION_OFFER = "vkprovider.io/offer-id"
MANAGED_BY = ("app.kubernetes.io/managed-by", "vkprovider")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:40]


def label_value(value: str) -> str:
    """``value`` if Kubernetes accepts it as a label value, else a stable ``h-<sha256>`` stand-in."""
    if len(value) <= 63 and _LABEL_VALUE.match(value):
        return value
    return f"h-{_digest(value)}"


def pod_name(uid: str) -> str:
    """``vk-<uid>`` when that is a DNS label (UUIDs are), else ``vk-<sha256 of uid>``."""
    candidate = f"vk-{uid}"
    return candidate if len(candidate) <= 58 and _DNS_LABEL.match(candidate) else f"vk-{_digest(uid)}"


def node_selector_labels(node_name: str) -> str:
    """The label selector of ``list(node)``."""
    return f"{LABEL_NODE_NAME}={label_value(node_name)}"


def parse_offer_id(offer_id: str) -> tuple[str, int] | None:
    """``<gpu label value>/<count>`` → (label value, count); anything else → ``None``."""
    raw, sep, count = offer_id.rpartition("/")
    if not sep or not count.isdigit() or "/" in raw or (raw and not _LABEL_VALUE.match(raw)):
        return None
    return raw, int(count)


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


class Manifests:
    """The objects for one request: ``pod`` always, ``secret``/``pull_secret`` when needed."""

    def __init__(
        self, request: DeploymentRequest, settings: KubernetesSettings, gpu_values: list[str]
    ) -> None:
        self._request = request
        self._settings = settings
        self.name = pod_name(request.uid)
        self.secret_data: dict[str, str] = {}
        self._modes: dict[str, int] = {}
        self.pod = self._pod(gpu_values)
        self.secret = self._secret() if self.secret_data else None
        self.pull_secret = self._pull_secret() if request.registry_credentials else None

    def _metadata(self, name: str) -> dict[str, Any]:
        r = self._request
        labels = dict(self._settings.extra_labels)
        labels.update(
            {
                LABEL_POD_UID: label_value(r.uid),
                LABEL_NODE_NAME: label_value(r.node_name),
                MANAGED_BY[0]: MANAGED_BY[1],
            }
        )
        annotations = {
            LABEL_POD_UID: r.uid,
            LABEL_NODE_NAME: r.node_name,
            LABEL_POD_NAMESPACE: r.namespace,
            LABEL_POD_NAME: r.name,
        }
        if r.offer_id:
            annotations[ANNOTATION_OFFER] = r.offer_id
        return {
            "name": name,
            "namespace": self._settings.namespace,
            "labels": labels,
            "annotations": annotations,
        }

    def _pod(self, gpu_values: list[str]) -> dict[str, Any]:
        r = self._request
        spec: dict[str, Any] = {
            "restartPolicy": r.restart_policy,
            "containers": [self._container(c, i, gpu=(i == 0)) for i, c in enumerate(r.containers)],
            "enableServiceLinks": False,
            "automountServiceAccountToken": False,
        }
        if r.init_containers:
            spec["initContainers"] = [
                self._container(c, i, gpu=False, prefix="init") for i, c in enumerate(r.init_containers)
            ]
        selector = dict(self._settings.node_selector)
        if len(gpu_values) == 1:
            selector[self._settings.gpu_type_label] = gpu_values[0]
        elif gpu_values:
            term = {"key": self._settings.gpu_type_label, "operator": "In", "values": sorted(gpu_values)}
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [term]}]
                    }
                }
            }
        if selector:
            spec["nodeSelector"] = selector
        if self._settings.tolerations:
            spec["tolerations"] = list(self._settings.tolerations)
        if self._settings.termination_grace_seconds is not None:
            spec["terminationGracePeriodSeconds"] = self._settings.termination_grace_seconds
        if r.registry_credentials:
            spec["imagePullSecrets"] = [{"name": f"{self.name}-pull"}]
        files = self._file_items()
        if files:
            spec["volumes"] = [{"name": "vk-files", "secret": {"secretName": self.name, "items": files}}]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": self._metadata(self.name), "spec": spec}

    def _file_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for key in sorted(k for k in self.secret_data if k.startswith("file-")):
            items.append({"key": key, "path": key, "mode": self._modes[key]})
        return items

    def _container(self, c: Container, index: int, *, gpu: bool, prefix: str = "c") -> dict[str, Any]:
        env: list[dict[str, Any]] = []
        for j, var in enumerate(c.env):
            if var.secret:
                key = f"env-{prefix}{index}-{j}"
                self.secret_data[key] = _b64(var.value)
                env.append({"name": var.name, "valueFrom": {"secretKeyRef": {"name": self.name, "key": key}}})
            else:
                env.append({"name": var.name, "value": var.value})
        mounts: list[dict[str, Any]] = []
        for j, file in enumerate(c.files):
            key = f"file-{prefix}{index}-{j}"
            self.secret_data[key] = _b64(file.content)
            self._modes[key] = file.mode
            mounts.append({"name": "vk-files", "mountPath": file.path, "subPath": key, "readOnly": True})
        container: dict[str, Any] = {"name": c.name, "image": c.image}
        if c.command:
            container["command"] = list(c.command)
        if c.args:
            container["args"] = list(c.args)
        if env:
            container["env"] = env
        if c.ports:
            container["ports"] = [
                {
                    "containerPort": p.container_port,
                    "protocol": p.protocol,
                    **({"name": p.name} if p.name else {}),
                }
                for p in c.ports
            ]
        if c.working_dir:
            container["workingDir"] = c.working_dir
        if mounts:
            container["volumeMounts"] = mounts
        requests: dict[str, str] = {}
        if c.cpu:
            requests["cpu"] = f"{round(c.cpu * 1000)}m"
        if c.memory_bytes:
            requests["memory"] = str(c.memory_bytes)
        resources: dict[str, Any] = {}
        if requests:
            resources["requests"] = requests
        if gpu and self._request.gpu_count:
            resources["limits"] = {self._settings.gpu_resource: str(self._request.gpu_count)}
        if resources:
            container["resources"] = resources
        return container

    def _secret(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": self._metadata(self.name),
            "type": "Opaque",
            "data": dict(self.secret_data),
        }

    def _pull_secret(self) -> dict[str, Any]:
        auths = {
            c.server: {
                "username": c.username,
                "password": c.password,
                "auth": _b64(f"{c.username}:{c.password}"),
            }
            for c in self._request.registry_credentials
        }
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": self._metadata(f"{self.name}-pull"),
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": _b64(json.dumps({"auths": auths}))},
        }


def service_for(pod: dict[str, Any], service_type: str) -> dict[str, Any] | None:
    """The Service that exposes a created ``pod``'s container ports (same name, selecting it by
    its pod-uid label, owned by it so it goes with it), or None when the pod declares no port.
    Each port is published on the container port's number; NodePort/LoadBalancer add the outside
    side (``nodePort``, the load balancer's address)."""
    seen: dict[tuple[int, str], dict[str, Any]] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            number, protocol = int(port["containerPort"]), port.get("protocol", "TCP")
            seen.setdefault(
                (number, protocol),
                {
                    "name": f"p{number}-{protocol.lower()}",
                    "port": number,
                    "targetPort": number,
                    "protocol": protocol,
                },
            )
    if not seen:
        return None
    meta = pod["metadata"]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "labels": dict(meta.get("labels") or {}),
        },
        "spec": {
            "type": service_type,
            "selector": {LABEL_POD_UID: (meta.get("labels") or {})[LABEL_POD_UID]},
            "ports": list(seen.values()),
        },
    }
    return owned_by(service, pod)


def owned_by(secret: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """``secret`` with an ownerReference to the created ``pod`` (garbage-collected with it)."""
    meta = pod["metadata"]
    reference = {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}
    return {**secret, "metadata": {**secret["metadata"], "ownerReferences": [reference]}}
