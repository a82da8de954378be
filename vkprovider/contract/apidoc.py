"""Generate docs/plugin-api.md from the plugin API itself: ``python -m vkprovider.contract.apidoc``.

The reference lists the ``Provider`` protocols (signatures and docstrings), the pod-identity
labels, every pydantic model ``vkprovider.plugins.api`` exports (fields, types, defaults,
meaning), the enums and the error classes. ``make docs`` writes it; a test regenerates it and
fails on any difference, so the reference cannot drift from the code.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from vkprovider.contract.apidoc_meanings import MEANINGS
from vkprovider.generated_doc import write_or_check
from vkprovider.plugins import api

DOC = Path("docs/plugin-api.md")
PROTOCOLS = (api.Provider, api.SupportsLogs, api.SupportsWatch, api.SupportsMetrics, api.SupportsEndpoints)
LABELS = ("LABEL_POD_UID", "LABEL_NODE_NAME", "LABEL_POD_NAMESPACE", "LABEL_POD_NAME")
#: The adapter kit: the classes an adapter subclasses and the members it writes or calls.
KIT_CLASSES: tuple[tuple[type, tuple[str, ...]], ...] = (
    (
        api.CloudAdapter,
        (
            "identity",
            "parse",
            "cloud_id",
            "status",
            "fetch",
            "fetch_all",
            "create",
            "remove",
            "known_id",
            "endpoints_of",
            "log_chunks",
            "find",
            "info",
            "capabilities",
        ),
    ),
    (
        api.KeyedHttpClient,
        (
            "from_settings",
            "error_detail",
            "error_class",
            "send",
            "send_json",
            "field",
            "list_field",
            "stream",
        ),
    ),
    (api.DirectSender, ("request",)),
    (api.H1Transport, ("handle_async_request", "aclose")),
)
KIT_FUNCTIONS = (api.cheapest_offer, api.one_container_status)
KIT = """\
## The adapter kit

An HTTP cloud adapter subclasses `CloudAdapter` and writes only its cloud's mapping: raw
object → identity, view, id and status; request → create; the delete call; optionally
`endpoints_of` and `log_chunks` (the adapter has `endpoints`/`logs` only if it writes them), and
sets the class attributes `adapter`, `version` and `kind` (its name for one deployment, in
messages). The kit implements `info`, `deploy`, `get`, `list`, `delete`, `endpoints` and `logs`
from them: the identity map (pod UID → cloud id) rebuilt from the cloud's
labels after a restart, deploy and delete serialised per UID, find-before-create, delete that
tolerates `NotFound`, `NotFound` for unknown UIDs, logs cut at `limit_bytes`. Its
`KeyedHttpClient` reads every failure through the one status table; the adapter writes only
`error_detail` (the cloud's wording) and `error_class` (its departures from the table).
`DirectSender` sends plain calls straight to an httpx transport (the key's rules kept, no
`AsyncClient` per-request work); `H1Transport` is such a transport for plain calls at about
half aiohttp's CPU (keep-alive pools over `vkprovider.h1`; not for streams). The rules behind each: [plugin-guide.md](plugin-guide.md),
*The adapter kit*.
"""
ERRORS = (
    api.InvalidRequest,
    api.Unsupported,
    api.NoCapacity,
    api.Transient,
    api.QuotaOrBilling,
    api.NotFound,
)
IDENTITY = """\
## Pod identity: `request.tags()`, not `request.labels`

Every deployment MUST carry the four tags `DeploymentRequest.tags()` returns; `list(node_name)`
selects by `vkprovider.io/node-name`, `get`/`delete` by `vkprovider.io/pod-uid`, and the service
finds orphans after a crash by them. `DeploymentRequest.labels` are the pod's own Kubernetes labels
(`app: llm` …): copy them if your cloud has room, but they identify nothing. If the cloud caps tag
names or characters, map these keys and map them back when reading, so that
`DeploymentStatus.uid`/`node_name` come out unchanged.

| constant | tag key | value |
|---|---|---|
"""
LABEL_VALUES = {
    "LABEL_POD_UID": "`request.uid`",
    "LABEL_NODE_NAME": "`request.node_name`",
    "LABEL_POD_NAMESPACE": "`request.namespace`",
    "LABEL_POD_NAME": "`request.name`",
}


def type_name(tp: Any) -> str:
    """A readable annotation: ``list[Container]``, ``str | None``, ``Literal['TCP', 'UDP']``."""
    if tp is type(None):
        return "None"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return "Literal[" + ", ".join(repr(a) for a in typing.get_args(tp)) + "]"
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(a) for a in typing.get_args(tp))}]"
    return getattr(tp, "__name__", str(tp))


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        return f"`{getattr(field.default_factory, '__name__', 'factory')}()`"
    value = field.default
    if isinstance(value, enum.Enum):
        return f"`{type(value).__name__}.{value.name}`"
    if isinstance(value, BaseModel):
        return f"`{type(value).__name__}()`"
    return f"`{value!r}`"


def meaning(model: type[BaseModel], name: str, field: FieldInfo) -> str:
    return field.description or MEANINGS.get(f"{model.__name__}.{name}", "")


def exported_models() -> list[type[BaseModel]]:
    found = [getattr(api, n) for n in api.__all__]
    return [
        o
        for o in found
        if isinstance(o, type) and issubclass(o, BaseModel) and o.__module__ == "vkprovider.models"
    ]


def missing_meanings() -> list[str]:
    """``Model.field`` entries with no description and no entry in ``MEANINGS``."""
    return [
        f"{m.__name__}.{n}"
        for m in exported_models()
        for n, f in m.model_fields.items()
        if not meaning(m, n, f)
    ]


def _doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__ or "").strip()


def _protocol(proto: type, names: tuple[str, ...] | None = None) -> list[str]:
    """A class's heading, docstring and public members (``names``: these, in this order)."""
    lines = [f"### `{proto.__name__}`", "", _doc(proto), ""]
    members = [(n, _member(proto, n)) for n in names] if names else list(proto.__dict__.items())
    for name, member in members:
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            assert member.fget is not None
            signature = f"{name}: {inspect.signature(member.fget).return_annotation}  (property)"
            doc = _doc(member.fget)
        elif callable(member):
            prefix = "async def" if inspect.iscoroutinefunction(member) else "def"
            signature = f"{prefix} {name}{inspect.signature(member)}"
            doc = _doc(member)
        else:
            continue
        lines += ["```python", signature.replace("'", ""), "```", "", doc, ""]
    return lines


def _member(cls: type, name: str) -> Any:
    """``name`` as defined on ``cls`` or a base (a classmethod bound, so ``cls`` is not shown)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            member = klass.__dict__[name]
            return getattr(cls, name) if isinstance(member, classmethod) else member
    raise AttributeError(name)


def _function(function: Any) -> list[str]:
    signature = f"def {function.__name__}{inspect.signature(function)}".replace("'", "")
    return ["```python", signature, "```", "", _doc(function), ""]


def _model(model: type[BaseModel]) -> list[str]:
    lines = [f"### `{model.__name__}`", ""]
    if model.__doc__ and model.__doc__ is not BaseModel.__doc__:
        lines += [_doc(model), ""]
    lines += ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        text = meaning(model, name, field).replace("|", "\\|")
        kind = type_name(field.annotation).replace("|", "\\|")  # a table cell, even inside code
        lines.append(f"| `{name}` | `{kind}` | {default_text(field)} | {text} |")
    return [*lines, ""]


def render() -> str:
    lines = [
        "# Plugin API reference",
        "",
        "<!-- Generated by `python -m vkprovider.contract.apidoc` (`make docs`) from",
        "     vkprovider/plugins/api.py and vkprovider/models.py. Do not edit by hand:",
        "     tests/contract/test_plugin_api_doc.py fails when this file and the code differ. -->",
        "",
        "Everything here is importable from `vkprovider.plugins.api`, the one module an adapter",
        "imports. How to write and test an adapter: [plugin-guide.md](plugin-guide.md).",
        "",
        "## Protocols",
        "",
    ]
    for proto in PROTOCOLS:
        lines += _protocol(proto)
    lines += IDENTITY.splitlines()
    lines += [f"| `{n}` | `{getattr(api, n)}` | {LABEL_VALUES[n]} |" for n in LABELS]
    lines += ["", "## Models", "", "All models are frozen pydantic models that forbid unknown fields.", ""]
    for model in exported_models():
        lines += _model(model)
    lines += [*KIT.splitlines(), ""]
    for cls, names in KIT_CLASSES:
        lines += _protocol(cls, names)
    for function in KIT_FUNCTIONS:
        lines += [f"### `{function.__name__}`", "", *_function(function)]
    lines += ["## Enums", ""]
    for enum_type in (api.Phase, api.ContainerState):
        values = ", ".join(f"`{m.value}`" for m in enum_type)
        lines += [
            f"- `{enum_type.__name__}`: {values}" + (f". {_doc(enum_type)}" if enum_type.__doc__ else ""),
            "",
        ]
    lines += [
        "## Errors",
        "",
        "Raise these, never bare exceptions; each crosses gRPC with its class, message and `retry_after`.",
        "",
    ]
    lines += ["| class | code | meaning |", "|---|---|---|"]
    for error in ERRORS:
        first = _doc(error).split("\n\n")[0].replace("\n", " ")
        lines.append(f"| `{error.__name__}` | `{error.code}` | {first} |")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_or_check(render, DOC, argv)


if __name__ == "__main__":
    raise SystemExit(main())
