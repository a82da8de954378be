"""A container's environment, resolved the way the kubelet resolves it.

Order of precedence (``makeEnvironmentVariables``): ``envFrom`` sources in order, then ``env``
entries in order (replacing same-named ones and expanding ``$(VAR)`` against what is defined so
far plus the service links), then service-link variables not already defined. Values read from
Secrets are marked ``secret`` so no layer ever prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vkprovider.models import EnvVar
from vkprovider.translate._fields import flag, invalid, items, obj, required_text, text
from vkprovider.translate.downward import field_value, resource_value
from vkprovider.translate.expansion import expand, mapping_for
from vkprovider.translate.names import reference_name
from vkprovider.translate.refs import RefResolver


@dataclass
class _Value:
    value: str
    secret: bool = False


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


async def _env_from(
    container: Mapping[str, Any], path: str, cname: str, refs: RefResolver, env: dict[str, _Value]
) -> None:
    for i, source in enumerate(items(container.get("envFrom"), f"{path}.envFrom")):
        spath = f"{path}.envFrom[{i}]"
        source = obj(source, spath)
        prefix = text(source.get("prefix"), f"{spath}.prefix")
        where = f'envFrom of container "{cname}"'
        if source.get("configMapRef") is not None:
            ref = obj(source["configMapRef"], f"{spath}.configMapRef")
            name = reference_name(ref.get("name"), f"{spath}.configMapRef.name")
            optional = flag(ref.get("optional"), f"{spath}.configMapRef.optional")
            data = await refs.config_map(name, optional=optional, where=where)
            for key, value in (data or {}).items():
                env[prefix + key] = _Value(value)
        elif source.get("secretRef") is not None:
            ref = obj(source["secretRef"], f"{spath}.secretRef")
            name = reference_name(ref.get("name"), f"{spath}.secretRef.name")
            optional = flag(ref.get("optional"), f"{spath}.secretRef.optional")
            secret = await refs.secret(name, optional=optional, where=where)
            for key, raw in (secret or {}).items():
                env[prefix + key] = _Value(_decode(raw), secret=True)
        else:
            raise invalid(spath, "needs configMapRef or secretRef")


async def _value_from(
    pod: Mapping[str, Any],
    source: Mapping[str, Any],
    path: str,
    var: str,
    cname: str,
    node_name: str,
    refs: RefResolver,
) -> _Value | None:
    where = f'env {var} of container "{cname}"'
    if source.get("fieldRef") is not None:
        return _Value(
            field_value(pod, obj(source["fieldRef"], f"{path}.fieldRef"), f"{path}.fieldRef", node_name)
        )
    if source.get("resourceFieldRef") is not None:
        ref = obj(source["resourceFieldRef"], f"{path}.resourceFieldRef")
        return _Value(resource_value(pod, ref, f"{path}.resourceFieldRef", cname))
    if source.get("configMapKeyRef") is not None:
        ref = obj(source["configMapKeyRef"], f"{path}.configMapKeyRef")
        name = reference_name(ref.get("name"), f"{path}.configMapKeyRef.name")
        key = required_text(ref.get("key"), f"{path}.configMapKeyRef.key")
        optional = flag(ref.get("optional"), f"{path}.configMapKeyRef.optional")
        value = await refs.config_map_key(name, key, optional=optional, where=where)
        return None if value is None else _Value(value)
    if source.get("secretKeyRef") is not None:
        ref = obj(source["secretKeyRef"], f"{path}.secretKeyRef")
        name = reference_name(ref.get("name"), f"{path}.secretKeyRef.name")
        key = required_text(ref.get("key"), f"{path}.secretKeyRef.key")
        optional = flag(ref.get("optional"), f"{path}.secretKeyRef.optional")
        raw = await refs.secret_key(name, key, optional=optional, where=where)
        return None if raw is None else _Value(_decode(raw), secret=True)
    raise invalid(path, "unsupported valueFrom source")


def _expand_literal(literal: str, env: Mapping[str, _Value], services: Mapping[str, str]) -> _Value:
    """Expand ``$(VAR)``; the result is secret if it pulled in any secret value."""
    tainted = False
    plain = mapping_for({k: v.value for k, v in env.items()}, services)

    def lookup(name: str) -> str:
        nonlocal tainted
        if name in env and env[name].secret:
            tainted = True
        return plain(name)

    return _Value(expand(literal, lookup), secret=tainted)


async def resolve_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    path: str,
    *,
    node_name: str,
    refs: RefResolver,
    services: Mapping[str, str],
) -> list[EnvVar]:
    cname = text(container.get("name"), f"{path}.name")
    env: dict[str, _Value] = {}
    await _env_from(container, path, cname, refs, env)
    for i, entry in enumerate(items(container.get("env"), f"{path}.env")):
        epath = f"{path}.env[{i}]"
        entry = obj(entry, epath)
        var = required_text(entry.get("name"), f"{epath}.name")
        literal = text(entry.get("value"), f"{epath}.value")
        if literal:
            env[var] = _expand_literal(literal, env, services)
        elif entry.get("valueFrom") is not None:
            source = obj(entry["valueFrom"], f"{epath}.valueFrom")
            resolved = await _value_from(pod, source, f"{epath}.valueFrom", var, cname, node_name, refs)
            if resolved is None:
                continue
            env[var] = resolved
        else:
            env[var] = _Value("")
    for var, value in services.items():
        env.setdefault(var, _Value(value))
    return [EnvVar(name=k, value=v.value, secret=v.secret) for k, v in env.items()]


def expand_command(values: list[str], env: list[EnvVar]) -> list[str]:
    """``command``/``args`` expansion against the final environment (kubelet semantics)."""
    lookup = mapping_for({e.name: e.value for e in env})
    return [expand(value, lookup) for value in values]
