"""Read the proxy environment once, not on every API request.

kubernetes_asyncio opens its aiohttp session with ``trust_env=True``, so every request looks up
``*_PROXY``/``NO_PROXY`` and reads ``~/.netrc`` (on a thread pool): 15-20 % of all CPU samples
under load. The service talks to one apiserver, whose proxy cannot change while it runs, so
the proxy is resolved once here (an explicit kubeconfig ``proxy-url`` wins) and the session is
replaced by one that trusts nothing from the environment. netrc credentials are never used
for the apiserver (it authenticates with certificates or bearer tokens).
"""

from __future__ import annotations

import urllib.parse
import urllib.request

import aiohttp
from kubernetes_asyncio import client


def env_proxy(host: str) -> str | None:
    """The proxy the environment names for ``host`` (an URL), honouring ``NO_PROXY``."""
    url = urllib.parse.urlsplit(host)
    if url.hostname and urllib.request.proxy_bypass(url.hostname):
        return None
    return urllib.request.getproxies().get(url.scheme or "https")


def settle_environment(api: client.ApiClient) -> None:
    """Resolve the proxy once and stop per-request environment lookups (call in a running loop)."""
    rest = api.rest_client
    configuration = api.configuration
    if not rest.proxy and configuration.host:
        proxy = env_proxy(configuration.host)
        if proxy:
            rest.proxy = configuration.proxy = proxy
    session: aiohttp.ClientSession = rest.pool_manager
    if not session.trust_env:
        return
    connector = session.connector
    session.detach()  # keep the connector (TLS settings, pool limit); drop the session only
    # The read buffer kubernetes_asyncio uses too: watch events can carry objects up to etcd's
    # 1.5 MiB request limit, beyond aiohttp's default.
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False, read_bufsize=2**21)
