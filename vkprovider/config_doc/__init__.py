"""Generate docs/configuration.md from the settings models: ``python -m vkprovider.config_doc``.

Every key of :class:`vkprovider.config.Settings`, nested sections included, with its type,
default and meaning (the field's ``description``, else an entry of :mod:`.meanings`), and the
``VKPROVIDER_*`` variable that overrides it. ``make docs`` writes it; a test regenerates it and
fails on any difference, and on any key without a meaning, so the reference cannot drift.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from vkprovider.config import Settings
from vkprovider.config_doc.meanings import MEANINGS
from vkprovider.generated_doc import write_or_check

DOC = Path("docs/configuration.md")


@dataclass(frozen=True)
class Key:
    path: str  # dotted, "[]" for a list's items
    model: type[BaseModel]
    name: str
    field: FieldInfo
    section: str  # the top-level section it belongs to


def _models_in(tp: Any) -> list[type[BaseModel]]:
    """The models a field holds: itself, a list's items, a union's members."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType, list, tuple):
        return [m for arg in typing.get_args(tp) for m in _models_in(arg)]
    return []


def _is_list(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in typing.get_args(tp))
    return origin is list


def keys(model: type[BaseModel] = Settings, prefix: str = "", section: str = "") -> Iterator[Key]:
    """Every key, depth first, in declaration order."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        top = section or name
        yield Key(path, model, name, field, top)
        nested = _models_in(field.annotation)
        inner = f"{path}[]." if _is_list(field.annotation) else f"{path}."
        for sub in nested:
            yield from keys(sub, inner, top)


def type_name(tp: Any) -> str:
    if tp is None or tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return type_name(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "section"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return " | ".join(repr(m.value) for m in tp)
    return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
        getattr(tp, "__name__", ""), getattr(tp, "__name__", str(tp))
    )


#: Longer defaults (a PromQL query) are named, not printed: the table must stay readable.
MAX_DEFAULT = 60


def default_text(field: FieldInfo, model: type[BaseModel] | None = None) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        return "(computed)"
    value = field.default
    if isinstance(value, BaseModel):
        return "(section defaults)"
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        return "`null`"
    if value in ({}, []):
        return f"`{value!r}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    text = f"{value}" if isinstance(value, str | int | float) and value != "" else f"{value!r}"
    if len(text) > MAX_DEFAULT:
        where = f" in `{model.__module__.replace('.', '/')}.py`" if model is not None else ""
        return f"(built in: {len(text)} characters{where})"
    return f"`{text}`"


def meaning(key: Key) -> str:
    text = (
        key.field.description
        or MEANINGS.get(key.path)
        or MEANINGS.get(f"{key.model.__name__}.{key.name}")
        # a ``nodes:`` item is a ``node:`` section: one meaning for both
        or (
            MEANINGS.get("node." + key.path.removeprefix("nodes[]."))
            if key.path.startswith("nodes[].")
            else ""
        )
        or _section_doc(key)
    )
    return " ".join(text.split())


def missing_meanings() -> list[str]:
    return [k.path for k in keys() if not meaning(k)]


def env_name(path: str) -> str:
    """The variable that overrides a key (lists and their items are set whole, as JSON)."""
    head = path.split("[]", 1)[0]
    return "VKPROVIDER_" + head.upper().replace(".", "__")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m vkprovider.config_doc` (`make docs`) from the settings models",
        "     (vkprovider/config.py and the sections it composes). Do not edit by hand:",
        "     tests/unit/config/test_configuration_doc.py fails when this file and the code differ. -->",
        "",
        "`vkprovider serve --config FILE` reads one YAML file with these keys; every key is optional",
        "unless marked *required*. A `VKPROVIDER_*` variable overrides a key: the key's path in upper",
        "case with `__` between levels (`node.internal_ip` → `VKPROVIDER_NODE__INTERNAL_IP`); a list",
        "(`providers`, `placement.providers_allow`…) is set whole, as JSON. Unknown keys are refused,",
        "and `serve` reports every bad key in one message before it connects to anything",
        "([operations.md](operations.md#start-up-checks)). The `settings` of a provider belong to its",
        "adapter: [providers.md](providers.md), or `vkprovider plugin` for a plugin's own.",
        "",
    ]
    section = ""
    for key in keys():
        heading = key.section if _models_in(Settings.model_fields[key.section].annotation) else ""
        if heading != section or key.path == next(iter(Settings.model_fields)):
            section = heading
            lines += ["", f"## `{section}`" if section else "## Top-level keys", ""]
            doc = _section_doc(key) if section else ""
            if doc:
                lines += [doc, ""]
            lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        kind = _cell(type_name(key.field.annotation))
        default = _cell(default_text(key.field, key.model))
        lines.append(f"| `{key.path}` | `{kind}` | {default} | {_cell(meaning(key))} |")
    return "\n".join(lines).strip() + "\n"


def _section_doc(key: Key) -> str:
    for model in _models_in(key.field.annotation):
        if model.__doc__ and model.__doc__ is not BaseModel.__doc__:
            return " ".join(inspect.cleandoc(model.__doc__).split("\n\n")[0].split())
    return ""


def main(argv: list[str] | None = None) -> int:
    return write_or_check(render, DOC, argv)
