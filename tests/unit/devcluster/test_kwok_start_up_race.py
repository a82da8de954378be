"""kwok's known start-up race (``fatal error: concurrent map writes``) is retried; nothing else is.

The "kwok" here is a shell script standing in for the binary: it crashes with a chosen last
word on its first start(s), then stays up and marks itself serving; the apiserver is an
``httpx.MockTransport`` that reports the node Ready once the script says it serves.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx
import pytest

from vkprovider.devcluster import Cluster, StartupError, Toolchain, pki
from vkprovider.devcluster import cluster as cluster_module
from vkprovider.devcluster.kwok import died_of_start_up_race
from vkprovider.devcluster.process import log_tail, spawn

RACE = "fatal error: concurrent map writes"


def _fake_kwok(tmp_path: Path, crashes: int, last_words: str) -> Toolchain:
    """A toolchain whose ``kwok`` dies ``crashes`` times with ``last_words`` and a Go-like stack."""
    tc = Toolchain(tmp_path / "tc")
    tc.bin_dir.mkdir(parents=True)
    script = tc.binary("kwok")
    script.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            count_file={tmp_path}/starts
            n=$(cat "$count_file" 2>/dev/null || echo 0)
            n=$((n + 1))
            echo "$n" > "$count_file"
            echo '{{"level":"INFO","msg":"Watch nodes"}}'
            if [ "$n" -le {crashes} ]; then
                echo '{last_words}'
                echo
                echo 'goroutine 1 [running]:'
                for i in $(seq 1 40); do echo "frame $i"; echo "	file.go:$i +0x1"; done
                echo 'main.main()'
                exit 2
            fi
            touch {tmp_path}/serving
            exec sleep 60
            """
        )
    )
    script.chmod(0o755)
    return tc


def _cluster(tmp_path: Path, tc: Toolchain) -> Cluster:
    logs = tmp_path / "run" / "logs"
    cluster = Cluster(
        name="race",
        workdir=tmp_path / "run",
        server="https://127.0.0.1:1",
        kubeconfig=tmp_path / "kubeconfig",
        ca_cert=tmp_path / "ca.crt",
        admin=pki.CertPair(tmp_path / "a.crt", tmp_path / "a.key"),
        gpu_nodes=["race-gpu-0"],
    )
    cluster.argv["kwok"] = []
    cluster.processes.append(spawn("kwok", tc.binary("kwok"), [], logs))
    return cluster


def _apiserver(tmp_path: Path) -> httpx.AsyncClient:
    def nodes(request: httpx.Request) -> httpx.Response:
        ready = "True" if (tmp_path / "serving").exists() else "False"
        item = {
            "metadata": {"name": "race-gpu-0"},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }
        return httpx.Response(200, json={"items": [item]})

    return httpx.AsyncClient(transport=httpx.MockTransport(nodes), base_url="https://apiserver")


async def test_kwok_dying_of_the_start_up_race_is_started_again(tmp_path: Path) -> None:
    tc = _fake_kwok(tmp_path, crashes=2, last_words=RACE)
    cluster = _cluster(tmp_path, tc)
    try:
        async with _apiserver(tmp_path) as client:
            await cluster._wait_kwok_nodes_ready(client, tc)
        assert (tmp_path / "starts").read_text().strip() == "3"
        assert cluster.component("kwok").alive()
        crashes = sorted(p.name for p in (tmp_path / "run" / "logs").glob("kwok.log.crash-*"))
        assert crashes == ["kwok.log.crash-1", "kwok.log.crash-2"]
        assert RACE not in (tmp_path / "run" / "logs" / "kwok.log").read_text()
    finally:
        cluster.component("kwok").stop(grace=5)


async def test_the_race_is_retried_only_so_often(tmp_path: Path) -> None:
    tc = _fake_kwok(tmp_path, crashes=cluster_module.KWOK_START_ATTEMPTS, last_words=RACE)
    cluster = _cluster(tmp_path, tc)
    async with _apiserver(tmp_path) as client:
        with pytest.raises(StartupError, match="concurrent map writes"):
            await cluster._wait_kwok_nodes_ready(client, tc)
    assert (tmp_path / "starts").read_text().strip() == str(cluster_module.KWOK_START_ATTEMPTS)


async def test_any_other_kwok_crash_fails_the_start_up_at_once(tmp_path: Path) -> None:
    tc = _fake_kwok(tmp_path, crashes=1, last_words="panic: runtime error: invalid memory address")
    cluster = _cluster(tmp_path, tc)
    async with _apiserver(tmp_path) as client:
        with pytest.raises(StartupError, match="invalid memory address"):
            await cluster._wait_kwok_nodes_ready(client, tc)
    assert (tmp_path / "starts").read_text().strip() == "1"
    assert not list((tmp_path / "run" / "logs").glob("kwok.log.crash-*"))


def test_the_race_is_recognised_by_the_last_crash_in_the_log(tmp_path: Path) -> None:
    log = tmp_path / "kwok.log"
    assert not died_of_start_up_race(log)  # no log at all
    log.write_text(f"info\n{RACE}\n\ngoroutine 1 [running]:\nmain.main()\n")
    assert died_of_start_up_race(log)
    log.write_text(f"{RACE}\nlater\npanic: something else\n")
    assert not died_of_start_up_race(log)
    log.write_text("E1206 failed to bind\n")
    assert not died_of_start_up_race(log)


def test_a_log_tail_keeps_the_crash_header_a_long_stack_would_cut_off(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    stack = [f"frame {i}" for i in range(100)]
    log.write_text("\n".join(["starting", RACE, "", "goroutine 1 [running]:", *stack]) + "\n")
    tail = log_tail(log, lines=15)
    assert tail.splitlines()[0] == RACE
    assert tail.splitlines()[-1] == "frame 99"
    short = tmp_path / "short.log"
    short.write_text("\n".join(["a", RACE, "b"]) + "\n")
    assert log_tail(short, lines=15) == f"a\n{RACE}\nb"  # nothing cut: nothing repeated
