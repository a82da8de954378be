"""``approve-csr --wait``: keeps approving until every running pod of the service holds an
approved certificate for its IP — the pod that became Ready before it asked included — and names
the pods still without one when the time is up.

The apiserver here is a dict of CSRs and pods behind ``request`` (the only call the command
makes), so the test can add a pod's CSR between two passes, as a late pod does.
"""

from __future__ import annotations

import argparse
import base64
import copy
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from vkprovider.cli import approve_csr
from vkprovider.http.kubelet_cert import _csr

NODE, SA = "vk-external", "system:serviceaccount:vkprovider-system:vkprovider"
A_IP, B_IP, C_IP = "10.0.3.17", "10.0.3.18", "10.0.3.19"


def csr(name: str, ip: str, *, approved: bool = False) -> dict[str, Any]:
    pem = _csr(NODE, [ip], ec.generate_private_key(ec.SECP256R1()))
    conditions = [{"type": "Approved", "status": "True"}] if approved else []
    return {
        "metadata": {"name": name, "labels": {approve_csr.LABEL: NODE}},
        "spec": {
            "request": base64.b64encode(pem).decode(),
            "signerName": approve_csr.SIGNER,
            "usages": ["digital signature", "server auth"],
            "username": SA,
        },
        "status": {"conditions": conditions},
    }


def pod(name: str, ip: str, *, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-06T08:00:00Z"
    return {"metadata": meta, "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}


class Apiserver:
    """CSRs and pods; ``later`` CSRs appear after ``passes_before_later`` CSR lists."""

    def __init__(self, csrs: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.csrs = {c["metadata"]["name"]: c for c in csrs}
        self.pods = pods
        self.later: list[dict[str, Any]] = []
        self.passes_before_later = 0
        self.lists = 0
        self.approved: list[str] = []

    async def request(self, method: str, path: str, query: Any = None, body: Any = None) -> Any:
        if method == "GET" and path == approve_csr.CSR_PATH:
            self.lists += 1
            if self.lists > self.passes_before_later:
                for c in self.later:
                    self.csrs.setdefault(c["metadata"]["name"], c)
            return {"items": [copy.deepcopy(c) for c in self.csrs.values()]}
        if method == "GET" and path.endswith("/pods"):
            return {"items": copy.deepcopy(self.pods)}
        if method == "PUT" and path.endswith("/approval"):
            name = path.split("/")[-2]
            self.csrs[name] = body
            self.approved.append(name)
            return body
        raise AssertionError(f"unexpected {method} {path}")


def args(wait: float) -> argparse.Namespace:
    return argparse.Namespace(
        node=NODE,
        requester=SA,
        pod_namespace="vkprovider-system",
        pod_selector="app=vkprovider",
        ip=[],
        dry_run=False,
        watch=0,
        wait=wait,
    )


@pytest.fixture(autouse=True)
def _fast_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approve_csr, "WAIT_PASS_SECONDS", 0.01)


async def test_a_pod_that_asks_after_the_first_pass_is_waited_for_and_approved() -> None:
    api = Apiserver([csr("csr-a", A_IP, approved=True)], [pod("vk-a", A_IP), pod("vk-b", B_IP)])
    api.later, api.passes_before_later = [csr("csr-b", B_IP)], 3
    assert await approve_csr._until_covered(api, args(wait=30)) == 0
    assert api.approved == ["csr-b"]
    assert await approve_csr.pods_without_certificate(api, args(wait=30)) == []


async def test_one_pass_alone_would_have_left_the_late_pod_without_a_certificate() -> None:
    api = Apiserver([csr("csr-a", A_IP, approved=True)], [pod("vk-a", A_IP), pod("vk-b", B_IP)])
    api.later, api.passes_before_later = [csr("csr-b", B_IP)], 1
    assert await approve_csr.approve_once(api, args(wait=0)) == 0  # nothing pending yet: "done"
    assert await approve_csr.pods_without_certificate(api, args(wait=0)) == [f"vk-b ({B_IP})"]


async def test_a_pod_that_never_asks_is_named_when_the_time_is_up(capsys: pytest.CaptureFixture[str]) -> None:
    api = Apiserver([csr("csr-a", A_IP, approved=True)], [pod("vk-a", A_IP), pod("vk-b", B_IP)])
    assert await approve_csr._until_covered(api, args(wait=0.05)) == 1
    assert f"no approved certificate yet for: vk-b ({B_IP})" in capsys.readouterr().out


async def test_terminating_pods_need_no_certificate_and_a_refused_csr_is_printed_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stranger = csr("csr-x", "192.0.2.9")  # an IP of no pod of the service: never approved
    api = Apiserver(
        [csr("csr-a", A_IP, approved=True), stranger],
        [pod("vk-a", A_IP), pod("vk-old", B_IP, terminating=True), pod("vk-c", C_IP)],
    )
    api.later, api.passes_before_later = [csr("csr-c", C_IP)], 4  # several passes before vk-c asks
    assert await approve_csr._until_covered(api, args(wait=30)) == 0
    out = capsys.readouterr().out
    assert out.count("not approved csr-x") == 1
    assert api.lists > 4 and api.approved == ["csr-c"]  # looped, approved only vk-c's


def test_watch_and_wait_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    both = args(wait=10)
    both.watch = 5
    assert approve_csr.run(both) == 2
    assert "--watch and --wait" in capsys.readouterr().err
