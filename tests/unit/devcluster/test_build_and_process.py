"""Bad input to the control-plane tooling ends in a clear message, never a traceback or a hang."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from vkprovider.devcluster import BuildError, Cluster, StartupError, Toolchain, build
from vkprovider.devcluster.build import ALL_BINARIES, _recipe
from vkprovider.devcluster.process import Process, ensure_port_free, spawn, start_time


def _fake_complete_cache(root: Path) -> Toolchain:
    toolchain = Toolchain(root)
    toolchain.bin_dir.mkdir(parents=True)
    for name in ALL_BINARIES:
        binary = toolchain.binary(name)
        binary.write_text("#!/bin/sh\nexit 0\n")
        binary.chmod(0o755)
        toolchain.stamp(name).write_text(_recipe(name))
    return toolchain


def test_complete_cache_is_reused(tmp_path: Path) -> None:
    toolchain = _fake_complete_cache(tmp_path)
    assert toolchain.missing() == []
    assert build(toolchain) is toolchain  # nothing to build, no Go needed


def test_half_built_binary_is_not_used(tmp_path: Path) -> None:
    toolchain = _fake_complete_cache(tmp_path)
    # An interrupted build leaves only a ``.partial`` file and no final binary.
    toolchain.binary("etcd").rename(toolchain.bin_dir / ".etcd.partial")
    assert toolchain.missing() == ["etcd"]


def test_binary_from_another_recipe_is_rebuilt(tmp_path: Path) -> None:
    toolchain = _fake_complete_cache(tmp_path)
    toolchain.stamp("kube-apiserver").write_text("kube-apiserver v0.0.0 ldflags=\n")
    assert toolchain.missing() == ["kube-apiserver"]


def test_missing_go_toolchain_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError, match="Go toolchain was not found"):
        build(Toolchain(tmp_path / "cache"))


def test_refused_module_download_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOPROXY", "off")
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "modcache"))
    monkeypatch.setenv("GOFLAGS", "-mod=mod")
    toolchain = _fake_complete_cache(tmp_path / "cache")
    toolchain.binary("etcd").unlink()
    with pytest.raises(BuildError, match="module download was refused") as info:
        build(toolchain)
    assert "resolve etcd modules failed" in str(info.value)
    assert not toolchain.binary("etcd").exists()


def test_port_clash_is_named() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(StartupError, match=f"127.0.0.1:{port} is already in use"):
            ensure_port_free(port, "kube-apiserver")


async def test_start_without_binaries_says_how_to_build(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match="make cluster-build"):
        await Cluster.start("nobins", toolchain=Toolchain(tmp_path), workdir=tmp_path / "run")


def test_process_stop_by_pid(tmp_path: Path) -> None:
    proc = spawn("sleeper", Path("/bin/sleep"), ["30"], tmp_path)
    assert proc.alive()
    proc.stop(grace=5)
    assert not proc.alive()
    with pytest.raises(ProcessLookupError):
        os.kill(proc.pid, 0)


def test_run_directories_of_dead_clusters_are_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vkprovider.devcluster.cluster import Cluster as C
    from vkprovider.devcluster.cluster import sweep_dead_clusters
    from vkprovider.devcluster.pki import CertPair

    monkeypatch.setenv("VKPROVIDER_CACHE", str(tmp_path))
    run = tmp_path / "run"
    alive = spawn("sleeper", Path("/bin/sleep"), ["30"], tmp_path / "logs")
    dead = spawn("quick", Path("/bin/true"), [], tmp_path / "logs")
    dead.stop(grace=5)
    try:
        for name, proc in (("live", alive), ("dead", dead)):
            (run / name).mkdir(parents=True)
            pair = CertPair(run / name / "a.crt", run / name / "a.key")
            C(name, run / name, "https://x", run / name / "k", pair.cert, pair, [proc]).save()
        (run / "booting").mkdir()  # no state yet: may be starting right now
        sweep_dead_clusters()
        assert sorted(p.name for p in run.iterdir()) == ["booting", "live"]
    finally:
        alive.stop(grace=5)


def test_port_in_time_wait_is_free() -> None:
    """After a server stops, its accepted connections linger in TIME_WAIT for a minute; the port
    is usable (every server here binds with SO_REUSEADDR), so the check must not refuse it."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server side closes first: its end goes to TIME_WAIT
    client.recv(1)
    client.close()
    server.close()
    ensure_port_free(port, "demo")  # no "already in use"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # the trap the check avoids


def test_a_recycled_pid_running_the_same_binary_is_not_ours(tmp_path: Path) -> None:
    """Every cluster runs the same kube-apiserver binary and PIDs wrap: a Process recorded with
    another start time (a stale state file, a process that died long ago) must neither count as
    alive nor be signalled, though its PID now runs that binary."""
    other = subprocess.Popen(["/bin/sleep", "30"])  # another run's process: not our child
    try:
        started = start_time(other.pid)
        assert started is not None
        ours = Process("sleeper", other.pid, "/bin/sleep", tmp_path / "log", started)
        assert ours.alive()
        assert Process.from_json(ours.to_json()) == ours
        stale = Process("sleeper", other.pid, "/bin/sleep", tmp_path / "log", started - 1)
        assert not stale.alive()
        stale.stop(grace=1)
        assert other.poll() is None, "the recycled PID was signalled"
    finally:
        other.kill()
        other.wait()


def _narrow_port_range(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, floor: int, width: int) -> None:
    from vkprovider.devcluster import process

    monkeypatch.setenv("VKPROVIDER_CACHE", str(tmp_path))
    monkeypatch.setattr(process, "_PORT_FLOOR", floor)
    monkeypatch.setattr(process, "_ephemeral_floor", lambda: floor + width)


def test_free_ports_come_from_below_the_ephemeral_range_and_are_not_handed_out_twice() -> None:
    """Outgoing connections take ports from the ephemeral range; a port handed to a child must
    not be one of them, and two callers must not be given the same number."""
    from vkprovider.devcluster.process import _ephemeral_floor, free_port

    ports = [free_port() for _ in range(40)]
    assert len(set(ports)) == len(ports)
    assert all(port < _ephemeral_floor() for port in ports)


def _two_free_adjacent_ports() -> int:
    """A port p such that p and p + 1 are both bindable now (below the ephemeral range)."""
    from vkprovider.devcluster.process import _bindable

    for floor in range(24000, 24400, 2):
        if _bindable(floor) and _bindable(floor + 1):
            return floor
    pytest.skip("no two adjacent free ports in 24000-24400")


def test_a_port_claimed_by_another_live_process_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vkprovider.devcluster.process import free_port

    floor = _two_free_adjacent_ports()
    _narrow_port_range(monkeypatch, tmp_path, floor, 2)
    other = subprocess.Popen(["sleep", "30"])
    try:
        claims = tmp_path / "ports"
        claims.mkdir()
        (claims / str(floor)).write_text(f"{other.pid} {start_time(other.pid)}")
        assert free_port() == floor + 1
        other.kill()
        other.wait()
        # the holder is gone: its claim is stale and is taken over
        (claims / str(floor + 1)).unlink()
        assert free_port() in {floor, floor + 1}
    finally:
        other.kill()
        other.wait()
