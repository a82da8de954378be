"""Read the proxy environment once, not on every API request; the TLS settings and the lean pool
(``vkprovider.h1``) for the apiserver's short calls.

kubernetes_asyncio opens its aiohttp session with ``trust_env=True``, so every request looks up
``*_PROXY``/``NO_PROXY`` and reads ``~/.netrc`` (on a thread pool): 15-20 % of all CPU samples
under load. The service talks to one apiserver, whose proxy cannot change while it runs, so
the proxy is resolved once here (an explicit kubeconfig ``proxy-url`` wins) and the session is
replaced by one that trusts nothing from the environment. netrc credentials are never used
for the apiserver (it authenticates with certificates or bearer tokens).
"""

from __future__ import annotations

import ssl
import urllib.parse
import urllib.request

import aiohttp
from kubernetes_asyncio import client

from vkprovider import h1


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


def tls_context(configuration: client.Configuration) -> ssl.SSLContext:
    """The TLS settings kubernetes_asyncio's own connector gets from ``configuration`` (CA, client
    certificate, verification switches), for the lean pool beside it."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    context.set_alpn_protocols(["http/1.1"])
    return context


def lean_pool(api: client.ApiClient, limit: int) -> h1.Pool | None:
    """The ``vkprovider.h1`` pool for the apiserver's short calls, or None when a proxy sits in
    between (kubeconfig ``proxy-url`` or the environment): those go through aiohttp, which speaks
    to proxies. Call after :func:`settle_environment`."""
    configuration = api.configuration
    url = urllib.parse.urlsplit(configuration.host or "")
    if api.rest_client.proxy or url.scheme not in ("http", "https") or not url.hostname:
        return None
    secure = url.scheme == "https"
    return h1.Pool(
        url.hostname,
        url.port or (443 if secure else 80),
        ssl_context=tls_context(configuration) if secure else None,
        server_hostname=configuration.tls_server_name or None,
        limit=limit,
    )
