"""A real kubelet API (TLS, client certificates, the real auth middleware) around any providers,
for tests that go through the kubelet's own routes (logs caps, attacks on the log endpoint)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.unit.http.test_auth import Reviews
from vkprovider.devcluster import pki
from vkprovider.http.auth import Authenticator
from vkprovider.http.kubelet import create_kubelet_app, server_tls
from vkprovider.http.log_caps import LogStreamCaps
from vkprovider.http.server import AsgiServer


@dataclass
class Tracked:
    provider: str


@dataclass
class Source:
    """The pod controller as the kubelet API reads it: informer cache, tracker, providers."""

    providers: Mapping[str, Any]
    node_name: str = "vk"
    cache: dict[str, Any] = field(default_factory=dict)
    tracked: dict[str, Tracked] = field(default_factory=dict)

    @property
    def informer(self) -> Any:
        return self

    @property
    def tracker(self) -> Any:
        return self.tracked

    def add_pod(self, namespace: str, name: str, uid: str, provider: str) -> None:
        self.cache[f"{namespace}/{name}"] = {
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"containers": [{"name": "main", "image": "img"}]},
            "status": {"phase": "Running"},
        }
        self.tracked[uid] = Tracked(provider)


@dataclass
class Kubelet:
    url: str
    apiserver: ssl.SSLContext  #: TLS with the apiserver's kubelet client certificate

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        kwargs.setdefault("timeout", 30)
        return httpx.AsyncClient(base_url=self.url, verify=self.apiserver, **kwargs)


@asynccontextmanager
async def serve_kubelet(
    tmp_path: Path, source: Source, caps: LogStreamCaps | None = None
) -> AsyncIterator[Kubelet]:
    """The kubelet API on 127.0.0.1 (a free port), trusting one CA whose client cert may read logs."""
    ca = pki.CertificateAuthority.create(tmp_path)
    serving = ca.issue(tmp_path, "serving", "vk", server=True, ip_addresses=("127.0.0.1",))
    client = ca.issue(
        tmp_path, "client", "kube-apiserver-kubelet-client", organization="system:masters", client=True
    )
    reviews = Reviews({}, {("kube-apiserver-kubelet-client", "get", "proxy")})
    app = create_kubelet_app(source, Authenticator(reviews, source.node_name), caps)
    server = AsgiServer(
        app, "127.0.0.1", 0, ssl_context=server_tls(str(serving.cert), str(serving.key), str(ca.pair.cert))
    )
    await server.start()
    context = ssl.create_default_context(cafile=str(ca.pair.cert))
    context.load_cert_chain(str(client.cert), str(client.key))
    try:
        yield Kubelet(server.url, context)
    finally:
        await server.stop()
