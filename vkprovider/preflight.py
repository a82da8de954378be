"""Start-up checks that look beyond the config file: ports, kubeconfig, in-cluster, URLs.

They run inside config validation (as pydantic validation *context*), so one pass reports every
bad field at once and nothing is connected to before the config is known to be sound. Only
``vkprovider serve`` asks for them (:class:`StartupChecks`); ``explain`` or ``plugin serve`` may
read the same file on a laptop where the kubeconfig path or the admin port mean nothing.

A problem is a :class:`FieldProblem`: a ``ValueError`` that carries one or more
``(relative field path, message)`` pairs, which the error report joins to the field it was
raised on (``node`` + ``lease_renew_seconds`` → ``node.lease_renew_seconds``).
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

#: A provider settings check: (index, name, adapter, settings) -> [(relative path, message)].
ProviderCheck = Callable[[int, str, str, dict[str, Any]], list[tuple[str, str]]]

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class FieldProblem(ValueError):
    """One or more problems below the field the validator runs on."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{path}: {msg}" if path else msg for path, msg in self.problems))

    @classmethod
    def one(cls, path: str, message: str) -> FieldProblem:
        return cls([(path, message)])


def in_cluster() -> bool:
    """What ``load_incluster_config`` needs: the service env variables and the token file."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and SERVICE_ACCOUNT_TOKEN.is_file()


@dataclass(frozen=True)
class StartupChecks:
    """What ``serve`` checks besides the schema; pass as ``load_settings(..., checks=...)``."""

    ports: bool = True
    kube: bool = True
    require_providers: bool = True
    #: Validates an in-process provider's ``settings`` with its adapter's model (set by the CLI,
    #: which may import the plugin registry; config may not).
    provider_settings: ProviderCheck | None = None
    in_cluster: Callable[[], bool] = in_cluster


def checks_from(context: Any) -> StartupChecks | None:
    return context if isinstance(context, StartupChecks) else None


def host_problem(host: str) -> str | None:
    """Why ``host`` is not an address to listen on, or None."""
    try:
        socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"{host!r} is not a usable address ({exc.strerror})"
    return None


def port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on, or None. Binds like the server (SO_REUSEADDR),
    so a port in TIME_WAIT is not a false alarm, then lets go at once."""
    if port == 0 or host_problem(host) is not None:
        return None
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"{host}:{port} is already in use"
            if exc.errno == errno.EACCES:
                return f"{host}:{port}: permission denied (ports below 1024 need privileges)"
            return f"{host}:{port}: cannot listen ({exc.strerror})"
    return None


def kubeconfig_problem(path: str) -> str | None:
    """Why ``path`` is not a usable kubeconfig, or None. Reads the YAML only: connecting (and
    the credentials) are checked when the service starts, with retries."""
    file = Path(path).expanduser()
    if not file.is_file():
        return f"{path}: no such file" if not file.exists() else f"{path}: not a regular file"
    try:
        data = yaml.safe_load(file.read_text())
    except OSError as exc:
        return f"{path}: cannot read it ({exc.strerror})"
    except yaml.YAMLError as exc:
        return f"{path}: not valid YAML ({str(exc).splitlines()[0]})"
    if not isinstance(data, dict) or "clusters" not in data:
        return f"{path}: not a kubeconfig (no 'clusters')"
    current = data.get("current-context")
    contexts = {
        c.get("name"): c.get("context") or {} for c in data.get("contexts") or [] if isinstance(c, dict)
    }
    if not current:
        return f"{path}: no current-context set"
    if current not in contexts:
        return f"{path}: current-context {current!r} is not among its contexts"
    cluster_name = contexts[current].get("cluster")
    clusters = {
        c.get("name"): c.get("cluster") or {} for c in data.get("clusters") or [] if isinstance(c, dict)
    }
    if cluster_name not in clusters:
        return f"{path}: context {current!r} names cluster {cluster_name!r}, which is not defined"
    server = str(clusters[cluster_name].get("server") or "")
    if url_problem(server) is not None:
        return f"{path}: cluster {cluster_name!r} has no valid server URL ({server or 'empty'})"
    return None


def no_cluster_message() -> str:
    hint = ""
    if os.environ.get("KUBECONFIG"):
        hint = " ($KUBECONFIG is set but not read: use VKPROVIDER_KUBE__KUBECONFIG=$KUBECONFIG)"
    return (
        "not set, and not running in a cluster (no KUBERNETES_SERVICE_HOST or service-account "
        f"token): set kube.kubeconfig or VKPROVIDER_KUBE__KUBECONFIG{hint}"
    )


def url_problem(value: object) -> str | None:
    """Why ``value`` is not an http(s) URL with a host, or None."""
    if not isinstance(value, str):
        return f"expected a URL string, got {type(value).__name__}"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        return f"{value!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{value!r} is not a URL (expected http://host[:port] or https://…)"
    return None


def url_fields(settings: dict[str, Any]) -> list[tuple[str, str]]:
    """Adapter-independent: every ``url``/``*_url`` string in a provider's settings must be a URL."""
    problems = []
    for key, value in settings.items():
        if (key == "url" or key.endswith("_url")) and value is not None:
            why = url_problem(value)
            if why is not None:
                problems.append((key, why))
    return problems
