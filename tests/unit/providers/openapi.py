"""Validate what adapters send (and what mocks answer) against the providers' OpenAPI documents.

The published documents (copied into ``tests/unit/providers/specs/``) are the only source of request/response shapes
for the cloud adapters. This helper resolves ``$ref``s inside a document with ``referencing`` and
validates with JSON Schema 2020-12 (the dialect of OpenAPI 3.1), so a request body that drifts
from the spec fails the test that built it.
"""

from __future__ import annotations

import copy
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPECS_DIR = Path(os.environ.get("VKPROVIDER_SPECS_DIR", Path(__file__).resolve().parent / "specs"))


_NO_EXAMPLE: Any = object()


def _pointer(*parts: str) -> str:
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


class OpenApiDoc:
    """One OpenAPI 3.1 document: schemas by path/method/status and their published examples."""

    def __init__(self, path: Path) -> None:
        text = path.read_text()
        self.doc: dict[str, Any] = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        self.uri = f"urn:vkprovider-spec:{path.name}"
        resource = Resource.from_contents(self.doc, default_specification=DRAFT202012)
        self.registry: Registry[Any] = Registry().with_resource(self.uri, resource)

    def operation(self, method: str, path: str) -> dict[str, Any]:
        op: dict[str, Any] = self.doc["paths"][path][method.lower()]
        return op

    def _validator(self, pointer: str) -> jsonschema.Draft202012Validator:
        return jsonschema.Draft202012Validator({"$ref": f"{self.uri}#{pointer}"}, registry=self.registry)

    def _media(self, method: str, path: str, *where: str) -> tuple[str, dict[str, Any]]:
        """(pointer, media object) of the first JSON-ish content under ``where``."""
        node: Any = self.operation(method, path)
        parts = ["paths", path, method.lower(), *where]
        for part in where:
            node = node[part]
        if "$ref" in node:  # a shared response object
            ref = node["$ref"].removeprefix("#/").split("/")
            node, parts = self.doc, ref
            for part in ref:
                node = node[part]
        for media, content in node["content"].items():
            if "json" in media:
                return _pointer(*parts, "content", media), content
        raise KeyError(f"{method} {path} {where}: no JSON content")

    def validate_request(self, method: str, path: str, body: Any) -> None:
        pointer, _ = self._media(method, path, "requestBody")
        self._validator(pointer + "/schema").validate(body)

    def validate_response(self, method: str, path: str, status: int | str, body: Any) -> None:
        pointer, _ = self._media(method, path, "responses", str(status))
        self._validator(pointer + "/schema").validate(body)

    def validate_schema(self, name: str, instance: Any) -> None:
        self._validator(_pointer("components", "schemas", name)).validate(instance)

    def response_example(self, method: str, path: str, status: int | str) -> Any:
        """The published example (first of ``examples``, else ``example``) of a response."""
        _, media = self._media(method, path, "responses", str(status))
        if "examples" in media:
            return next(iter(media["examples"].values()))["value"]
        return media["example"]

    def response_schema(self, method: str, path: str, status: int | str) -> Any:
        _, media = self._media(method, path, "responses", str(status))
        return media["schema"]

    def resolve(self, schema: Any) -> Any:
        """Follow a local ``$ref`` (``#/components/...``) to the schema it names."""
        while isinstance(schema, dict) and "$ref" in schema:
            node: Any = self.doc
            for part in schema["$ref"].removeprefix("#/").split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            schema = node
        return schema

    def example_from_schema(self, schema: Any) -> Any:
        """An instance assembled from the per-property ``example``s the spec publishes.

        Used where a response has no whole example (Vast.ai instances): every property with an
        example contributes it, so the mock carries exactly the published field shapes.
        """
        schema = self.resolve(schema)
        if "example" in schema:
            return copy.deepcopy(schema["example"])
        if isinstance(schema.get("examples"), list) and schema["examples"]:
            return copy.deepcopy(schema["examples"][0])
        if "properties" in schema:
            built = {}
            for name, sub in schema["properties"].items():
                value = self.example_from_schema(sub)
                if value is not _NO_EXAMPLE:
                    built[name] = value
            return built
        if schema.get("type") == "array" and "items" in schema:
            item = self.example_from_schema(schema["items"])
            return [] if item is _NO_EXAMPLE else [item]
        return _NO_EXAMPLE

    def request_example(self, method: str, path: str) -> Any:
        _, media = self._media(method, path, "requestBody")
        if "examples" in media:
            return next(iter(media["examples"].values()))["value"]
        return media["example"]


@cache
def load(name: str) -> OpenApiDoc:
    return OpenApiDoc(SPECS_DIR / name)


def runpod() -> OpenApiDoc:
    return load("runpod-rest-v2.openapi.json")


def vastai() -> OpenApiDoc:
    return load("vastai.openapi.yaml")
