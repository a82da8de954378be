"""The JSON wire format shared by the fakecloud server and its adapter.

``DeploymentRequest`` carries file contents as bytes, which JSON cannot hold, so files travel
base64-encoded; everything else is the model's own JSON form. Statuses travel as
``DeploymentStatus`` JSON, errors as ``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from vkprovider.plugins.api import DeploymentRequest

API_PREFIX = "/v1"
NODE_SELECTOR_PARAM = "labelSelector"


def encode_request(request: DeploymentRequest) -> dict[str, Any]:
    """JSON-safe form: the model's plain dump (only str/int/float/bool/list/dict) with every
    file's content base64-encoded."""
    data = request.model_dump(mode="python")
    for kind in ("containers", "init_containers"):
        for container in data[kind]:
            for file in container["files"]:
                file["content"] = base64.b64encode(file["content"]).decode("ascii")
    return data


def decode_request(data: Any) -> DeploymentRequest:
    """Inverse of ``encode_request``; raises ``ValueError`` (incl. pydantic's) on bad input."""
    if not isinstance(data, dict):
        raise ValueError("request must be an object")
    data = dict(data)
    for kind in ("containers", "init_containers"):
        containers = data.get(kind) or []
        if not isinstance(containers, list):
            raise ValueError(f"{kind} must be a list")
        data[kind] = [_decode_container(c) for c in containers]
    return DeploymentRequest.model_validate(data)


def _decode_container(container: Any) -> Any:
    if not isinstance(container, dict) or not isinstance(container.get("files"), list):
        return container
    files = []
    for file in container["files"]:
        if isinstance(file, dict) and isinstance(file.get("content"), str):
            try:
                file = {**file, "content": base64.b64decode(file["content"], validate=True)}
            except binascii.Error:
                raise ValueError("files[].content must be base64") from None
        files.append(file)
    return {**container, "files": files}


def parse_selector(raw: str | None) -> dict[str, str]:
    """``k=v,k2==v2`` equality selectors (all the adapter needs)."""
    selector: dict[str, str] = {}
    for part in (raw or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.replace("==", "=").partition("=")
        if not sep or not key.strip():
            raise ValueError(f"unsupported label selector term {part!r}")
        selector[key.strip()] = value.strip()
    return selector
