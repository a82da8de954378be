"""The kubelet's authn/authz rules: subresource mapping, 401/403, review caching, no token kept."""

from __future__ import annotations

from typing import Any

import pytest

from vkprovider.http.auth import (
    Authenticator,
    Denied,
    admin_protects,
    is_loopback_bind,
    kubelet_subresources,
    user_from_certificate,
)
from vkprovider.kube.errors import KubeUnavailable


class Reviews:
    """The apiserver's review APIs at the edge: who may do what, and every request seen."""

    def __init__(self, tokens: dict[str, str], grants: set[tuple[str, str, str]]) -> None:
        self.tokens, self.grants = tokens, grants
        self.seen: list[dict[str, Any]] = []
        self.down = False

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        self.seen.append(body)
        if self.down:
            raise KubeUnavailable(0, "connection refused")
        if body["kind"] == "TokenReview":
            user = self.tokens.get(body["spec"]["token"])
            ok = user is not None
            return {
                "status": {"authenticated": ok, "user": {"username": user, "groups": ["g"]} if ok else {}}
            }
        attrs = body["spec"]["resourceAttributes"]
        allowed = (body["spec"]["user"], attrs["verb"], attrs["subresource"]) in self.grants
        assert attrs["resource"] == "nodes" and attrs["name"] == "vk"
        return {"status": {"allowed": allowed, "reason": "" if allowed else "no RBAC rule"}}


@pytest.mark.parametrize(
    ("path", "subs"),
    [
        ("/stats/summary", ["stats"]),
        ("/metrics/resource", ["metrics"]),
        ("/metrics", ["metrics"]),
        ("/logs/syslog", ["log"]),
        ("/containerLogs/ns/p/c", ["proxy"]),  # the kubelet maps container logs to proxy
        ("/exec/ns/p/c", ["proxy"]),
        ("/pods", ["pods", "proxy"]),
        ("/runningpods/", ["pods", "proxy"]),
        ("/healthz", ["healthz", "proxy"]),
        ("/statsfoo", ["proxy"]),  # a sub-path, not a prefix match
    ],
)
def test_subresource_mapping_follows_the_kubelet(path: str, subs: list[str]) -> None:
    assert kubelet_subresources(path) == subs


def test_certificate_user_is_cn_with_organizations_as_groups() -> None:
    cert = {
        "subject": (
            (("commonName", "kube-apiserver-kubelet-client"),),
            (("organizationName", "system:masters"),),
        )
    }
    user = user_from_certificate(cert)
    assert (
        user is not None
        and user.name == "kube-apiserver-kubelet-client"
        and user.groups == ("system:masters",)
    )
    assert user_from_certificate(None) is None and user_from_certificate({}) is None


async def test_no_credentials_is_401_unless_anonymous_is_enabled() -> None:
    reviews = Reviews({}, {("system:anonymous", "get", "stats")})
    with pytest.raises(Denied) as err:
        await Authenticator(reviews, "vk").authenticate({}, None)
    assert err.value.status == 401
    anon = Authenticator(reviews, "vk", anonymous=True)
    user = await anon.authenticate({}, None)
    assert user.name == "system:anonymous"
    await anon.authorize(user, "get", ["stats"], "/stats/summary")
    with pytest.raises(Denied) as err:
        await anon.authorize(user, "get", ["proxy"], "/containerLogs/a/b/c")
    assert err.value.status == 403


async def test_token_review_then_access_review_both_cached_token_never_stored() -> None:
    now = [0.0]
    reviews = Reviews({"s3cret-token": "alice"}, {("alice", "get", "stats")})
    auth = Authenticator(reviews, "vk", token_ttl=10, allowed_ttl=10, denied_ttl=5, clock=lambda: now[0])
    for _ in range(3):
        user = await auth.authenticate({"authorization": "Bearer s3cret-token"}, None)
        await auth.authorize(user, "get", ["stats"], "/stats/summary")
    assert user.name == "alice" and auth.reviews == 2  # one TokenReview, one SAR
    with pytest.raises(Denied) as err:
        await auth.authorize(user, "get", ["pods", "proxy"], "/pods")
    assert (
        err.value.status == 403
        and "subresource=pods, or proxy" in str(err.value)
        and "alice" in str(err.value)
    )
    assert "s3cret" not in repr(auth.__dict__)  # caches key on a hash
    now[0] = 11.0  # expired: reviewed again
    await auth.authenticate({"authorization": "Bearer s3cret-token"}, None)
    assert auth.reviews == 5


async def test_rejected_token_is_401_and_an_unreachable_api_denies_without_caching() -> None:
    reviews = Reviews({}, set())
    auth = Authenticator(reviews, "vk")
    with pytest.raises(Denied) as err:
        await auth.authenticate({"authorization": "Bearer nope"}, None)
    assert err.value.status == 401
    reviews.down = True
    with pytest.raises(Denied) as err:
        await auth.authenticate({"authorization": "Bearer other"}, None)
    assert err.value.status == 401 and "could not review" in str(err.value)
    reviews.down, reviews.tokens = False, {"other": "bob"}
    assert (await auth.authenticate({"authorization": "Bearer other"}, None)).name == "bob"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("198.18.0.1", False),
        ("example.internal", False),
    ],
)
def test_loopback_binds(host: str, loopback: bool) -> None:
    assert is_loopback_bind(host) is loopback


def test_admin_protects_views_not_probes() -> None:
    assert all(admin_protects(p) for p in ("/state", "/placement", "/explain"))
    assert not any(admin_protects(p) for p in ("/healthz", "/readyz", "/metrics", "/statefoo"))
