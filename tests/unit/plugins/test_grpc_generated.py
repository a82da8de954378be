"""The committed generated code matches the proto, and the method table matches the service."""

from __future__ import annotations

from pathlib import Path

from vkprovider.plugins._generated import provider_pb2 as pb
from vkprovider.plugins.grpc import generate, methods


def test_regenerating_yields_the_committed_files(tmp_path: Path) -> None:
    written = generate.generate(tmp_path)
    assert {p.name for p in written} == {"__init__.py", "provider_pb2.py", "provider_pb2.pyi"}
    for path in written:
        committed = generate.OUT_DIR / path.name
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run `make proto`"


def test_method_table_matches_the_service_descriptor() -> None:
    service = pb.DESCRIPTOR.services_by_name["Provider"]
    assert service.full_name == methods.SERVICE
    described = {
        m.name: (m.input_type.full_name, m.output_type.full_name, m.server_streaming, m.client_streaming)
        for m in service.methods
    }
    table = {
        m.name: (m.request.DESCRIPTOR.full_name, m.response.DESCRIPTOR.full_name, m.server_streaming, False)
        for m in methods.ALL_METHODS
    }
    assert table == described
