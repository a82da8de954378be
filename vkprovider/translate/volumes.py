"""Volumes → files delivered into containers (``FileMount``), and the volume types we refuse.

Supported: configMap, secret, downwardAPI, projected (of those) and emptyDir (an empty directory,
sent as a ``FileMount`` whose path ends in ``/``). The service-account token volume the admission
controller adds to every pod (``kube-api-access-*``) is skipped silently: the token and cluster CA
are useless on an external cloud, and rejecting it would reject every pod. Like the kubelet, all
volumes are resolved (a missing mandatory ConfigMap fails the pod even if no container mounts it).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vkprovider.models import FileMount
from vkprovider.translate._fields import flag, integer, invalid, items, obj, required_text, text
from vkprovider.translate.downward import field_value, resource_value
from vkprovider.translate.names import reference_name
from vkprovider.translate.refs import RefResolver
from vkprovider.translate.types import TranslationEvent

SUPPORTED = ("configMap", "secret", "downwardAPI", "projected", "emptyDir")
_DEFAULT_MODE = 0o644


@dataclass
class VolumeFile:
    path: str
    content: bytes = field(repr=False)
    mode: int
    secret: bool = False


@dataclass
class Volume:
    """What a volume delivers: files, an empty directory, or nothing (ignored)."""

    files: list[VolumeFile] = field(default_factory=list)
    empty_dir: bool = False
    ignored: bool = False


def _mode(value: Any, path: str, default: int) -> int:
    mode = integer(value, path, default)
    assert mode is not None
    if not 0 <= mode <= 0o777:
        raise invalid(path, "must be between 0 and 0777 (511)")
    return mode


def _rel_path(value: Any, path: str) -> str:
    rel = required_text(value, path)
    if rel.startswith("/") or ".." in rel.split("/"):
        raise invalid(path, "must be a relative path without '..'")
    return rel


class _Builder:
    def __init__(self, pod: Mapping[str, Any], refs: RefResolver, node_name: str) -> None:
        self.pod, self.refs, self.node_name = pod, refs, node_name

    async def keyed(self, source: Mapping[str, Any], path: str, kind: str, where: str, mode: int) -> Volume:
        """A configMap or secret source: all keys, or only ``items`` (key → path, mode)."""
        name_key = "secretName" if kind == "secret" and "secretName" in source else "name"
        name = reference_name(source.get(name_key), f"{path}.{name_key}")
        optional = flag(source.get("optional"), f"{path}.optional")
        raw: Mapping[str, bytes] | None
        if kind == "secret":
            raw = await self.refs.secret(name, optional=optional, where=where)
        else:
            strings = await self.refs.config_map(name, optional=optional, where=where)
            raw = None if strings is None else {k: v.encode() for k, v in strings.items()}
        if raw is None:
            return Volume()
        mode = _mode(source.get("defaultMode"), f"{path}.defaultMode", mode)
        secret = kind == "secret"
        selected = items(source.get("items"), f"{path}.items")
        if not selected:
            return Volume([VolumeFile(key, value, mode, secret) for key, value in raw.items()])
        volume = Volume()
        for i, item in enumerate(selected):
            ipath = f"{path}.items[{i}]"
            item = obj(item, ipath)
            key = required_text(item.get("key"), f"{ipath}.key")
            rel = _rel_path(item.get("path"), f"{ipath}.path")
            item_mode = _mode(item.get("mode"), f"{ipath}.mode", mode)
            if key in raw:
                volume.files.append(VolumeFile(rel, raw[key], item_mode, secret))
            else:
                message = f'key "{key}" not found in {kind} "{name}" ({where})'
                self.refs.miss(kind, "KeyNotFound", optional, message)
        return volume

    def downward(self, source: Mapping[str, Any], path: str, mode: int) -> Volume:
        volume = Volume()
        mode = _mode(source.get("defaultMode"), f"{path}.defaultMode", mode)
        for i, item in enumerate(items(source.get("items"), f"{path}.items")):
            ipath = f"{path}.items[{i}]"
            item = obj(item, ipath)
            rel = _rel_path(item.get("path"), f"{ipath}.path")
            if item.get("fieldRef") is not None:
                ref = obj(item["fieldRef"], f"{ipath}.fieldRef")
                value = field_value(self.pod, ref, f"{ipath}.fieldRef", self.node_name)
            elif item.get("resourceFieldRef") is not None:
                ref = obj(item["resourceFieldRef"], f"{ipath}.resourceFieldRef")
                value = resource_value(self.pod, ref, f"{ipath}.resourceFieldRef", None)
            else:
                raise invalid(ipath, "needs fieldRef or resourceFieldRef")
            volume.files.append(
                VolumeFile(rel, value.encode(), _mode(item.get("mode"), f"{ipath}.mode", mode))
            )
        return volume

    async def projected(self, name: str, source: Mapping[str, Any], path: str) -> Volume:
        sources = [obj(s, f"{path}.sources[{i}]") for i, s in enumerate(items(source.get("sources"), path))]
        if name.startswith("kube-api-access-") and any("serviceAccountToken" in s for s in sources):
            return Volume(ignored=True)
        mode = _mode(source.get("defaultMode"), f"{path}.defaultMode", _DEFAULT_MODE)
        volume = Volume()
        where = f'volume "{name}"'
        for i, src in enumerate(sources):
            spath = f"{path}.sources[{i}]"
            if "configMap" in src:
                part = await self.keyed(
                    obj(src["configMap"], spath), f"{spath}.configMap", "configmap", where, mode
                )
            elif "secret" in src:
                part = await self.keyed(obj(src["secret"], spath), f"{spath}.secret", "secret", where, mode)
            elif "downwardAPI" in src:
                part = self.downward(obj(src["downwardAPI"], spath), f"{spath}.downwardAPI", mode)
            elif "serviceAccountToken" in src:
                message = f"{spath}.serviceAccountToken: service account tokens are not delivered ({where})"
                self.refs.warnings.append(TranslationEvent("ServiceAccountTokenNotDelivered", message))
                continue
            else:
                kinds = ", ".join(sorted(str(k) for k in src)) or "empty source"
                raise invalid(spath, f"projected source {kinds} is not supported on a virtual node")
            volume.files.extend(part.files)
        return volume

    async def build(self, volume: Mapping[str, Any], path: str) -> Volume:
        name = required_text(volume.get("name"), f"{path}.name")
        kinds = [key for key in volume if key != "name"]
        unsupported = [k for k in kinds if k not in SUPPORTED]
        if unsupported:
            kind = str(unsupported[0])
            raise invalid(f"{path}.{kind}", f"{kind} volumes are not supported on a virtual node")
        if len(kinds) != 1:
            raise invalid(path, "exactly one volume source is required")
        kind = kinds[0]
        source = obj(volume[kind], f"{path}.{kind}")
        where = f'volume "{name}"'
        if kind == "emptyDir":
            return Volume(empty_dir=True)
        if kind == "downwardAPI":
            return self.downward(source, f"{path}.downwardAPI", _DEFAULT_MODE)
        if kind == "projected":
            return await self.projected(name, source, f"{path}.projected")
        ref_kind = "secret" if kind == "secret" else "configmap"
        return await self.keyed(source, f"{path}.{kind}", ref_kind, where, _DEFAULT_MODE)


async def build_volumes(pod: Mapping[str, Any], refs: RefResolver, node_name: str) -> dict[str, Volume]:
    spec = obj(pod.get("spec"), "spec")
    builder = _Builder(pod, refs, node_name)
    result: dict[str, Volume] = {}
    for i, raw in enumerate(items(spec.get("volumes"), "spec.volumes")):
        volume = obj(raw, f"spec.volumes[{i}]")
        built = await builder.build(volume, f"spec.volumes[{i}]")
        result[text(volume.get("name"), f"spec.volumes[{i}].name")] = built
    return result


def mounts_for(container: Mapping[str, Any], path: str, volumes: Mapping[str, Volume]) -> list[FileMount]:
    """The files one container receives, from its ``volumeMounts``."""
    if container.get("volumeDevices"):
        raise invalid(f"{path}.volumeDevices", "raw block devices are not supported on a virtual node")
    files: list[FileMount] = []
    for i, raw in enumerate(items(container.get("volumeMounts"), f"{path}.volumeMounts")):
        mpath = f"{path}.volumeMounts[{i}]"
        mount = obj(raw, mpath)
        for key in ("subPath", "subPathExpr"):
            if text(mount.get(key), f"{mpath}.{key}"):
                raise invalid(f"{mpath}.{key}", f"{key} mounts are not supported on a virtual node")
        name = required_text(mount.get("name"), f"{mpath}.name")
        target = required_text(mount.get("mountPath"), f"{mpath}.mountPath")
        if name not in volumes:
            raise invalid(f"{mpath}.name", f'volume "{name}" is not defined in spec.volumes')
        volume = volumes[name]
        if volume.ignored:
            continue
        if volume.empty_dir:
            files.append(FileMount(path=target.rstrip("/") + "/", mode=0o777))
            continue
        for file in volume.files:
            full = posixpath.join(target, file.path)
            files.append(FileMount(path=full, content=file.content, mode=file.mode, secret=file.secret))
    return files
