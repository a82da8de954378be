"""The real kubelet node's small parts, without a node: the sandbox image archive, the cluster
DNS's wire format and name parsing, the apiserver relay, and the kubelet build recipe."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import socket
import struct
import tarfile

import pytest

from vkprovider.devcluster import cluster_dns, node_tools, tcp_forward
from vkprovider.devcluster.build import EXTRA_BINARIES, KUBERNETES_VERSION, NODE_COMMANDS, _recipe
from vkprovider.devcluster.process import free_port


def _members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_the_pause_archive_is_an_oci_layout_whose_digests_hold() -> None:
    archive = node_tools.oci_archive(b"\x7fELF-not-really", "localhost/vkprovider-pause:1")
    files = _members(archive)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert name.removeprefix("blobs/sha256/") == hashlib.sha256(data).hexdigest()
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/vkprovider-pause:1"
    manifest = json.loads(files[f"blobs/sha256/{entry['digest'].removeprefix('sha256:')}"])
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].removeprefix('sha256:')}"])
    assert config["config"]["Entrypoint"] == ["/pause"]
    (layer,) = manifest["layers"]
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]  # uncompressed: diff ID = digest
    layer_files = _members(files[f"blobs/sha256/{layer['digest'].removeprefix('sha256:')}"])
    assert layer_files == {"pause": b"\x7fELF-not-really"}


def test_the_pause_archive_is_the_same_bytes_every_time() -> None:
    assert node_tools.oci_archive(b"x", "a:1") == node_tools.oci_archive(b"x", "a:1")


def _query(name: str, qtype: int = 1, ident: int = 0x1234) -> bytes:
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.split("."))
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", qtype, 1)


def test_a_query_is_parsed_and_answered_with_one_a_record() -> None:
    packet = _query("Web.Default.svc.cluster.local")
    ident, flags, name, qtype, question = cluster_dns.parse_query(packet)
    assert (ident, name, qtype) == (0x1234, "web.default.svc.cluster.local", 1)
    reply = cluster_dns.response(ident, flags, question, 0, "10.0.0.54")
    rid, rflags, qd, an = struct.unpack("!HHHH", reply[:8])
    assert (rid, qd, an) == (0x1234, 1, 1)
    assert rflags & 0x8000 and rflags & 0x0100 and rflags & 0x000F == 0  # a response, RD echoed, NOERROR
    assert reply[-4:] == socket.inet_aton("10.0.0.54")


def test_nxdomain_has_no_answer() -> None:
    ident, flags, _, _, question = cluster_dns.parse_query(_query("example.com"))
    reply = cluster_dns.response(ident, flags, question, 3)
    assert struct.unpack("!HHHH", reply[:8])[3] == 0
    assert struct.unpack("!H", reply[2:4])[0] & 0x000F == 3


def test_a_packet_with_two_questions_is_refused() -> None:
    packet = bytearray(_query("a.b.svc.cluster.local"))
    packet[4:6] = struct.pack("!H", 2)
    with pytest.raises(ValueError):
        cluster_dns.parse_query(bytes(packet))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("fakecloud-cheap.vkprovider-system.svc.cluster.local", ("vkprovider-system", "fakecloud-cheap")),
        ("kubernetes.default.svc.cluster.local", ("default", "kubernetes")),
        ("fakecloud-cheap.vkprovider-system.svc.vkprovider-system.svc.cluster.local", None),  # a search try
        ("default.svc.cluster.local", None),
        ("example.com", None),
    ],
)
def test_only_service_names_of_the_domain_are_looked_up(name: str, expected: tuple[str, str] | None) -> None:
    assert cluster_dns.service_of(name, "cluster.local") == expected


async def test_the_relay_carries_bytes_both_ways() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write((await reader.readexactly(5)).upper())
        await writer.drain()
        writer.close()

    target_port, relay_port = free_port(), free_port()
    target = await asyncio.start_server(echo, "127.0.0.1", target_port)
    relay = asyncio.create_task(tcp_forward.serve("127.0.0.1", relay_port, "127.0.0.1", target_port))
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                reader, writer = await asyncio.open_connection("127.0.0.1", relay_port)
                break
            await asyncio.sleep(0.05)
        writer.write(b"hello")
        assert await reader.read() == b"HELLO"
        writer.close()
    finally:
        relay.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await relay
        target.close()
        await target.wait_closed()


def test_kubelet_is_built_from_the_pinned_tree_with_the_version_stamped() -> None:
    assert "kubelet" in NODE_COMMANDS and "kubelet" in EXTRA_BINARIES
    recipe = _recipe("kubelet")
    assert recipe.startswith(f"kubelet {KUBERNETES_VERSION} ")
    assert f"gitVersion={KUBERNETES_VERSION}" in recipe
