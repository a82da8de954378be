"""The CLI's side of the admin API: where it is, which token to send, and which replica leads.

Shared by ``vkprovider status``, ``vkprovider explain --admin`` and ``vkprovider uninstall-check``.

* **Address**: ``--admin URL`` (repeatable: one per replica), else the ``http`` section of
  ``--config FILE``, else ``http://127.0.0.1:10255`` (inside the service's pod).
* **Token**: ``--token``, else ``--token-file``, else the pod's mounted ServiceAccount token when
  it exists (``kubectl exec`` into the service's pod needs no flag). Off loopback the admin API
  wants a bearer token whose user may ``get`` (``create`` for ``/explain``) ``nodes/<node>/proxy``.
* **Leader**: only the leader holds a term; a standby's ``/state`` is ``{"role": "standby",
  "leader": <pod>}``. Every address given is asked, the leader's answer is used, and when only
  standbys answered the error names the leader, so nobody mistakes a standby's silence for
  "nothing runs". With several virtual nodes (``nodes:``) each replica may lead some of
  them: each node's view is taken from the replica that leads it (:func:`merged_nodes`).

Failures are :class:`AdminApiError` with a message naming the flag to fix (401/403/unreachable).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from vkprovider.errors import VkProviderError

DEFAULT_ADMIN = "http://127.0.0.1:10255"
#: Where the kubelet mounts a pod's ServiceAccount token (the service's image runs in such a pod).
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
JSON = dict[str, Any]

#: Exit codes of the commands that read the admin API.
EXIT_UNREACHABLE = 1
EXIT_STANDBY_ONLY = 3


class AdminApiError(VkProviderError):
    """The admin API could not be read; ``exit_code`` is what the command returns."""

    code = "AdminApiError"

    def __init__(self, message: str, *, exit_code: int = EXIT_UNREACHABLE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_arguments(parser: argparse.ArgumentParser, *, config: bool = True) -> None:
    parser.add_argument(
        "--admin",
        action="append",
        metavar="URL",
        help=f"admin API base URL; repeat it for each replica (default: from --config, else {DEFAULT_ADMIN})",
    )
    if config:
        parser.add_argument(
            "--config", help="service config file: read the admin address from its http section"
        )
    parser.add_argument("--token", help="bearer token for the admin API (see also --token-file)")
    parser.add_argument(
        "--token-file",
        help=f"file holding the bearer token (default: {SERVICE_ACCOUNT_TOKEN} when it exists)",
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the admin API")


def admin_urls(args: argparse.Namespace) -> list[str]:
    if args.admin:
        return [str(url).rstrip("/") for url in args.admin]
    if getattr(args, "config", None):
        from vkprovider.config import load_settings

        http = load_settings(args.config).http
        host = "127.0.0.1" if http.admin_host in ("0.0.0.0", "::", "") else http.admin_host
        scheme = "https" if http.tls_cert_file else "http"
        return [f"{scheme}://{host}:{http.admin_port}"]
    return [DEFAULT_ADMIN]


@dataclass(frozen=True)
class Credentials:
    token: str | None
    source: str  # the flag or file it came from, for error messages

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def credentials(args: argparse.Namespace) -> Credentials:
    if args.token:
        return Credentials(str(args.token).strip(), "--token")
    path = Path(args.token_file) if args.token_file else None
    source = "--token-file"
    if path is None and SERVICE_ACCOUNT_TOKEN.is_file():
        path, source = SERVICE_ACCOUNT_TOKEN, f"the pod's ServiceAccount token ({SERVICE_ACCOUNT_TOKEN})"
    if path is None:
        return Credentials(None, "no token (--token, --token-file)")
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise AdminApiError(f"--token-file: cannot read {path}: {exc.strerror or exc}", exit_code=2) from None
    if not token:
        raise AdminApiError(f"--token-file: {path} is empty", exit_code=2)
    return Credentials(token, f"{source} {path}" if source == "--token-file" else source)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return str(body)[:300]


def _refused(url: str, response: httpx.Response, creds: Credentials, verb: str) -> AdminApiError:
    detail = _detail(response)
    if response.status_code == 401:
        hint = (
            "pass a bearer token with --token or --token-file"
            if creds.token is None
            else f"the token from {creds.source} was not accepted (expired or not a token of this cluster?)"
        )
    else:
        hint = (
            f"the token from {creds.source} is not allowed: its user needs '{verb}' on nodes/<node>/proxy "
            "(bind the ClusterRole vkprovider-admin-api; docs/operations.md, 'The admin API'); "
            "over plain HTTP a token is accepted only from the pod itself (kubectl port-forward or exec)"
        )
    return AdminApiError(
        f"the admin API at {url} refused the request ({response.status_code}: {detail}): {hint}"
    )


def request(
    url: str, method: str, path: str, creds: Credentials, timeout: float, *, body: Any = None
) -> JSON:
    """One call; ``AdminApiError`` naming ``--admin``/``--token`` on every failure."""
    verb = "get" if method == "GET" else "create"
    try:
        response = httpx.request(method, f"{url}{path}", headers=creds.headers(), json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        raise AdminApiError(
            f"the admin API at {url} (--admin) did not answer: {type(exc).__name__}: {exc}"
        ) from None
    if response.status_code in (401, 403):
        raise _refused(url, response, creds, verb)
    if not response.is_success:
        raise AdminApiError(
            f"the admin API at {url}{path} answered {response.status_code}: {_detail(response)}"
        )
    try:
        data = response.json()
    except ValueError:
        raise AdminApiError(
            f"the admin API at {url}{path} answered with something that is not JSON"
        ) from None
    if not isinstance(data, dict):
        raise AdminApiError(f"the admin API at {url}{path} answered {type(data).__name__}, not an object")
    return data


def _leads_a_node(state: JSON) -> bool:
    """With several virtual nodes a replica may stand by for the first and lead others."""
    nodes = state.get("nodes")
    return isinstance(nodes, list) and any(n.get("role") != "standby" for n in nodes if isinstance(n, dict))


def merged_nodes(states: list[JSON]) -> list[JSON] | None:
    """Each node's view from the replica that leads it (a standby's only when none does), in
    the order the first answer lists them; None for a one-node service (no ``nodes``)."""
    by_name: dict[str, JSON] = {}
    for state in states:
        for entry in state.get("nodes") or []:
            name = str(entry.get("node"))
            if name not in by_name or (
                by_name[name].get("role") == "standby" and entry.get("role") != "standby"
            ):
                by_name[name] = entry
    return list(by_name.values()) or None


@dataclass
class LeaderView:
    """The leader's ``/state`` and what the other addresses said."""

    url: str
    state: JSON
    standbys: dict[str, str | None] = field(default_factory=dict)  # url -> the leader it named
    failures: dict[str, str] = field(default_factory=dict)  # url -> why it did not answer


def leader_state(urls: list[str], creds: Credentials, timeout: float) -> LeaderView:
    """Ask every address; the answer of the one that is not a standby wins.

    Raises ``AdminApiError`` if none answered (with each reason), or with exit code 3 if only
    standbys answered (naming the leader they see).
    """
    leader: tuple[str, JSON] | None = None
    standbys: dict[str, str | None] = {}
    failures: dict[str, str] = {}
    answers: dict[str, JSON] = {}
    for url in urls:
        try:
            state = request(url, "GET", "/state", creds, timeout)
        except AdminApiError as exc:
            if len(urls) == 1:
                raise
            failures[url] = exc.message
            continue
        answers[url] = state
        if state.get("role") == "standby" and not _leads_a_node(state):
            standbys[url] = state.get("leader")
        elif leader is None:
            leader = (url, state)
    if leader is not None:
        nodes = merged_nodes(list(answers.values()))
        state = leader[1] if nodes is None else {**nodes[0], "nodes": nodes}
        return LeaderView(leader[0], state, standbys, failures)
    if standbys:
        named = sorted({str(name) for name in standbys.values() if name})
        who = (
            f"the leader is {', '.join(named)}"
            if named
            else "no leader is known yet (an election is running)"
        )
        pod = named[0] if named else "<leader pod>"
        asked = ", ".join(standbys)
        unreachable = "".join(f"\n  {url}: {why}" for url, why in failures.items())
        raise AdminApiError(
            f"only standby replicas answered ({asked}): a standby holds no pods or deployments; {who}. "
            f"Ask the leader: kubectl -n vkprovider-system exec {pod} -- vkprovider status "
            f"(or --admin with its address){unreachable}",
            exit_code=EXIT_STANDBY_ONLY,
        )
    raise AdminApiError(
        "no admin API answered:" + "".join(f"\n  {url}: {why}" for url, why in failures.items())
    )
