"""``vkprovider approve-csr``: approve the virtual node's own kubelet-serving CSRs, and nothing else.

With ``kubelet.csr`` every new pod of the service (an upgrade, a reschedule: a new pod IP) asks
for a serving certificate with a ``kubernetes.io/kubelet-serving`` CSR, which no built-in
controller approves. This approves exactly those, each only if all of this holds:

* it carries the label ``vkprovider.io/node-name=<node>`` and the signer
  ``kubernetes.io/kubelet-serving``, and is neither approved nor denied yet;
* its requester (``spec.username``) is the service's ServiceAccount (``--requester``);
* the request's signature is valid, its subject is exactly ``O=system:nodes, CN=system:node:<node>``;
* its SANs are the node name (DNS) and IP addresses of the service's running pods
  (``--pod-namespace``/``--pod-selector``) or given with ``--ip``; no e-mail, URI or other name;
* its usages are ``server auth`` and ``digital signature`` (``key encipherment`` allowed).

Anything else is left pending and printed with the reasons (a person decides; nothing is
denied). It runs with the caller's kubeconfig (``--kubeconfig``, else as kubectl finds one), which needs
``list``/``get`` on ``certificatesigningrequests``, ``update`` on
``certificatesigningrequests/approval``, ``approve`` on ``signers`` named
``kubernetes.io/kubelet-serving``, and ``list`` on pods in the service's namespace
(docs/deploy.md, "The kubelet API"). ``--watch N`` repeats every N seconds. ``--wait N`` repeats
until every running (not terminating) pod of the service has an approved CSR naming its IP, at
most N seconds: a pod is Ready before its CSR is sure to exist, so one pass right after
``rollout status`` could miss the last new pod's request and leave the leader without a
serving certificate (``kubectl logs`` and ``kubectl top`` failing until someone ran it again).

Exit codes: 0 nothing left pending for the node (with ``--wait``: every running pod of the
service covered; CSRs it would not approve are still printed), 1 some CSR was not approved (with
``--wait``: some pod still without a certificate when the time was up), 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import ipaddress
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

SIGNER = "kubernetes.io/kubelet-serving"
LABEL = "vkprovider.io/node-name"
CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
ALLOWED_USAGES = frozenset({"server auth", "digital signature", "key encipherment"})
JSON = dict[str, Any]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "approve-csr",
        help="approve the virtual node's own kubelet-serving CSRs (name, SANs, requester checked)",
    )
    parser.add_argument("--node", default="vk-external", help="the virtual node's name (node.name)")
    parser.add_argument(
        "--requester",
        default="system:serviceaccount:vkprovider-system:vkprovider",
        help="the only user whose CSRs are approved (the service's ServiceAccount)",
    )
    parser.add_argument(
        "--pod-namespace", default="vkprovider-system", help="namespace of the service's pods"
    )
    parser.add_argument(
        "--pod-selector",
        default="app.kubernetes.io/name=vkprovider,app.kubernetes.io/component=virtual-node",
        help="label selector of the service's pods, whose IPs may be SANs",
    )
    parser.add_argument("--ip", action="append", default=[], help="another IP SAN to allow (repeatable)")
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig (default: as kubectl: in a pod its ServiceAccount, else $KUBECONFIG or ~/.kube/config)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would be approved, approve nothing"
    )
    parser.add_argument("--watch", type=float, default=0, metavar="SECONDS", help="repeat every SECONDS")
    parser.add_argument(
        "--wait",
        type=float,
        default=0,
        metavar="SECONDS",
        help="keep approving until every running pod of the service has an approved certificate "
        "for its IP (a pod that just became Ready may not have asked yet), at most SECONDS",
    )
    parser.set_defaults(handler=run)


def _csr_problems(request_pem: bytes, node: str, ips: frozenset[str]) -> list[str]:
    try:
        request = x509.load_pem_x509_csr(request_pem)
    except ValueError as exc:
        return [f"spec.request is not a PEM certificate request ({exc})"]
    problems = []
    if not request.is_signature_valid:
        problems.append("the request's signature is not valid")
    subject = sorted((a.oid.dotted_string, str(a.value)) for a in request.subject)
    expected = sorted(
        [
            (NameOID.ORGANIZATION_NAME.dotted_string, "system:nodes"),
            (NameOID.COMMON_NAME.dotted_string, f"system:node:{node}"),
        ]
    )
    if subject != expected:
        problems.append(
            f"subject {request.subject.rfc4514_string()} is not O=system:nodes,CN=system:node:{node}"
        )
    try:
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [*problems, "no subject alternative names"]
    for name in sans:
        if isinstance(name, x509.DNSName):
            if name.value != node:
                problems.append(f"DNS name {name.value} is not the node's name {node}")
        elif isinstance(name, x509.IPAddress):
            if str(name.value) not in ips:
                problems.append(f"IP {name.value} is not an IP of the service's pods (or --ip)")
        else:
            problems.append(f"SAN {name!r} is neither the node's name nor an IP")
    return problems


def problems(csr: Mapping[str, Any], *, node: str, requester: str, ips: Iterable[str]) -> list[str]:
    """Why ``csr`` must not be approved; empty when it is the node's own serving CSR."""
    spec = csr.get("spec") or {}
    found = []
    if (csr.get("metadata") or {}).get("labels", {}).get(LABEL) != node:
        found.append(f"label {LABEL} is not {node}")
    if spec.get("signerName") != SIGNER:
        found.append(f"signer {spec.get('signerName')} is not {SIGNER}")
    if spec.get("username") != requester:
        found.append(f"requested by {spec.get('username')!r}, not {requester!r}")
    usages = set(spec.get("usages") or [])
    if "server auth" not in usages or not usages <= ALLOWED_USAGES:
        found.append(f"usages {sorted(usages)} are not server auth (+ digital signature, key encipherment)")
    try:
        pem = base64.b64decode(spec.get("request") or "", validate=True)
    except ValueError:
        return [*found, "spec.request is not base64"]
    normalized = frozenset(str(ipaddress.ip_address(ip)) for ip in ips)
    return found + _csr_problems(pem, node, normalized)


def _decided(csr: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") in ("Approved", "Denied", "Failed")
        for c in (csr.get("status") or {}).get("conditions") or []
    )


async def _pod_ips(kube: Any, namespace: str, selector: str) -> set[str]:
    pods = await kube.request(
        "GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": selector}
    )
    ips: set[str] = set()
    for pod in pods.get("items") or []:
        status = pod.get("status") or {}
        if status.get("phase") in ("Pending", "Running"):
            ips |= _ips_of(status)
    return ips


def _ips_of(status: Mapping[str, Any]) -> set[str]:
    """A pod's IPs as its status gives them (``podIPs`` and ``podIP``)."""
    ips = {str(p.get("ip")) for p in status.get("podIPs") or [] if p.get("ip")}
    if status.get("podIP"):
        ips.add(str(status["podIP"]))
    return ips


def _approved(csr: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Approved" and c.get("status", "True") == "True"
        for c in (csr.get("status") or {}).get("conditions") or []
    )


def _san_ips(csr: Mapping[str, Any]) -> set[str]:
    """The IP addresses a CSR asks for (none if it cannot be read)."""
    try:
        pem = base64.b64decode((csr.get("spec") or {}).get("request") or "", validate=True)
        request = x509.load_pem_x509_csr(pem)
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return set()
    return {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}


async def pods_without_certificate(kube: Any, args: argparse.Namespace) -> list[str]:
    """The service's running, not terminating pods whose IP no approved CSR of the node names."""
    csrs = await kube.request("GET", CSR_PATH, query={"labelSelector": f"{LABEL}={args.node}"})
    covered: set[str] = set()
    for csr in csrs.get("items") or []:
        if _approved(csr):
            covered |= _san_ips(csr)
    pods = await kube.request(
        "GET", f"/api/v1/namespaces/{args.pod_namespace}/pods", query={"labelSelector": args.pod_selector}
    )
    missing = []
    for pod in pods.get("items") or []:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if status.get("phase") != "Running" or meta.get("deletionTimestamp"):
            continue
        ips = {str(ipaddress.ip_address(ip)) for ip in _ips_of(status)}
        if not ips & covered:
            missing.append(f"{meta.get('name')} ({', '.join(sorted(ips)) or 'no IP yet'})")
    return missing


async def approve_once(kube: Any, args: argparse.Namespace, reported: set[str] | None = None) -> int:
    """One pass; returns how many of the node's CSRs were left pending. A CSR left pending is
    printed once per ``reported`` set (each pass of ``--watch``/``--wait`` would repeat it)."""
    csrs = await kube.request("GET", CSR_PATH, query={"labelSelector": f"{LABEL}={args.node}"})
    pending = [c for c in csrs.get("items") or [] if not _decided(c)]
    if not pending:
        return 0
    ips = await _pod_ips(kube, args.pod_namespace, args.pod_selector) | set(args.ip)
    left = 0
    for csr in pending:
        name = csr["metadata"]["name"]
        found = problems(csr, node=args.node, requester=args.requester, ips=ips)
        if found:
            left += 1
            if reported is None or name not in reported:
                print(f"not approved {name}: " + "; ".join(found))
            if reported is not None:
                reported.add(name)
            continue
        if args.dry_run:
            print(f"would approve {name}")
            continue
        status = dict(csr.get("status") or {})
        status["conditions"] = [
            *(status.get("conditions") or []),
            {
                "type": "Approved",
                "status": "True",
                "reason": "VkproviderApproveCsr",
                "message": f"vkprovider approve-csr: the serving certificate of node {args.node}, "
                f"requested by {args.requester}",
            },
        ]
        await kube.request("PUT", f"{CSR_PATH}/{name}/approval", body={**csr, "status": status})
        print(f"approved {name}")
    return left


async def _run(args: argparse.Namespace) -> int:
    from vkprovider.kube.client import KubeClient

    kube = await KubeClient.connect(args.kubeconfig)
    try:
        if args.wait > 0:
            return await _until_covered(kube, args)
        while True:
            left = await approve_once(kube, args)
            if args.watch <= 0:
                return 1 if left else 0
            await asyncio.sleep(args.watch)
    finally:
        await kube.close()


#: seconds between two passes of ``--wait``
WAIT_PASS_SECONDS = 2.0


async def _until_covered(kube: Any, args: argparse.Namespace) -> int:
    """``--wait``: approve until every running pod of the service holds an approved certificate,
    or the time is up (exit 1, naming the pods still without one)."""
    deadline = time.monotonic() + args.wait
    reported: set[str] = set()
    while True:
        await approve_once(kube, args, reported)
        missing = await pods_without_certificate(kube, args)
        if not missing:
            return 0  # what it would not approve was printed; every pod is served
        if time.monotonic() >= deadline:
            print(f"after {args.wait:.0f}s, no approved certificate yet for: " + "; ".join(missing))
            return 1
        await asyncio.sleep(WAIT_PASS_SECONDS)


def run(args: argparse.Namespace) -> int:
    if args.watch > 0 and args.wait > 0:
        print(
            "error: --watch and --wait: use one (--watch repeats forever, --wait until covered)",
            file=sys.stderr,
        )
        return 2
    if args.watch < 0 or args.wait < 0:
        print("error: --watch/--wait: SECONDS must not be negative", file=sys.stderr)
        return 2
    for ip in args.ip:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            print(f"error: --ip: {ip!r} is not an IP address", file=sys.stderr)
            return 2
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 130
