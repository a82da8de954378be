"""Secret values never leave the guard in a provider's messages (issue 21, item 6: scrubbing).

A cloud that echoes its input in errors and status messages is played by ``EchoingProvider``:
every message it sends back quotes the request, raw, JSON-encoded and base64-encoded. What the
guard hands on (errors, statuses, its own log lines) must carry none of the secret values, while
plain (non-secret) values still read as they were.
"""

from __future__ import annotations

import base64
import json
import logging

import pytest

from vkprovider.errors import InvalidRequest, NotFound, Transient
from vkprovider.models import (
    Container,
    ContainerStatus,
    DeploymentRequest,
    DeploymentStatus,
    EnvVar,
    FileMount,
    Phase,
    RegistryCredential,
)
from vkprovider.plugins.guard import GuardedProvider, guard
from vkprovider.plugins.memory import InMemoryProvider
from vkprovider.plugins.scrub import REDACTED, Scrubber, SecretBook, secret_values

ENV_SECRET = 'pa"ss\\word-1'
FILE_SECRET = b"-----BEGIN KEY-----\nMIIEvQ\n-----END KEY-----\n"
PULL_PASSWORD = "registry-token-77"
PLAIN = "plain-config-value"


def request(uid: str = "uid-1") -> DeploymentRequest:
    return DeploymentRequest(
        uid=uid,
        namespace="team-a",
        name="p",
        node_name="vk",
        containers=[
            Container(
                name="c",
                image="busybox",
                env=[
                    EnvVar(name="DB_PASSWORD", value=ENV_SECRET, secret=True),
                    EnvVar(name="MODE", value=PLAIN),
                    EnvVar(name="SHORT", value="on", secret=True),
                ],
                files=[FileMount(path="/etc/key.pem", content=FILE_SECRET, secret=True)],
            )
        ],
        registry_credentials=[RegistryCredential(server="r.io", username="bob", password=PULL_PASSWORD)],
    )


def echo(req: DeploymentRequest) -> str:
    """What a careless cloud says back: the whole request, in three encodings."""
    body = req.model_dump_json()
    auth = " ".join(
        base64.b64encode(f"{c.username}:{c.password}".encode()).decode() for c in req.registry_credentials
    )
    return f"rejected {body} auth={auth} {PLAIN}"


LEAKS = [
    ENV_SECRET,
    json.dumps(ENV_SECRET)[1:-1],
    base64.b64encode(ENV_SECRET.encode()).decode(),
    "MIIEvQ\n-----END KEY",
    base64.b64encode(FILE_SECRET).decode(),
    PULL_PASSWORD,
    base64.b64encode(f"bob:{PULL_PASSWORD}".encode()).decode(),
]


def assert_clean(text: str) -> None:
    for leak in LEAKS:
        assert leak not in text, leak
    assert REDACTED in text


def echo_secrets(req: DeploymentRequest) -> str:
    """The secret values themselves (raw, base64, in JSON), as a cloud quoting its input would."""
    parts = [echo(req)]
    for container in req.containers:
        for env in container.env:
            if env.secret:
                parts += [
                    env.value,
                    base64.b64encode(env.value.encode()).decode(),
                    json.dumps({"v": env.value}),
                ]
        parts += [f.content.decode() for f in container.files if f.secret]
    return " ".join(parts)


class EchoingProvider(InMemoryProvider):
    """Echoes each request in its errors and statuses; ``mode`` picks how it fails."""

    def __init__(self, mode: str) -> None:
        super().__init__("echo")
        self.mode = mode
        self.requests: dict[str, DeploymentRequest] = {}

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        self.requests[request.uid] = request
        if self.mode == "invalid":
            raise InvalidRequest(echo_secrets(request))
        if self.mode == "transient":
            raise Transient(echo_secrets(request)) from ValueError(echo_secrets(request))
        if self.mode == "crash":
            raise RuntimeError(echo_secrets(request))
        status = DeploymentStatus(
            uid=request.uid,
            phase=Phase.FAILED,
            node_name=request.node_name,
            reason="Echo",
            message=echo_secrets(request),
            containers=[ContainerStatus(name="c", reason="Echo", message=echo_secrets(request))],
        )
        self.deployments[request.uid] = status
        return status

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> None:
        if self.mode == "delete":
            raise Transient(f"cannot delete: {echo_secrets(self.requests[uid])}")
        await super().delete(uid)


def guarded(mode: str) -> GuardedProvider:
    return guard(EchoingProvider(mode))


# ---------------------------------------------------------------- the scrubber itself


def test_scrubber_replaces_every_form_and_leaves_short_and_plain_values() -> None:
    scrub = Scrubber([ENV_SECRET.encode(), b"on"])
    text = f"a {ENV_SECRET} b {json.dumps(ENV_SECRET)} c {base64.b64encode(ENV_SECRET.encode()).decode()} on"
    clean = scrub(text)
    assert ENV_SECRET not in clean and json.dumps(ENV_SECRET)[1:-1] not in clean
    assert clean.count(REDACTED) == 3
    assert clean.endswith(" on")  # two characters: never redacted


def test_secret_values_are_only_the_secret_ones() -> None:
    values = secret_values(request())
    assert ENV_SECRET.encode() in values and FILE_SECRET in values
    assert PULL_PASSWORD.encode() in values and f"bob:{PULL_PASSWORD}".encode() in values
    assert PLAIN.encode() not in values and b"on" not in values


# ---------------------------------------------------------------- through the guard


@pytest.mark.parametrize("mode", ["invalid", "transient", "crash"])
async def test_deploy_errors_are_scrubbed(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    provider = guarded(mode)
    caplog.set_level(logging.DEBUG)
    with pytest.raises((InvalidRequest, Transient)) as caught:
        await provider.deploy(request())
    assert_clean(str(caught.value))
    chained = caught.value.__cause__ or caught.value.__context__
    assert chained is None or all(leak not in str(chained) for leak in LEAKS)
    for record in caplog.records:
        assert all(leak not in record.getMessage() for leak in LEAKS)


async def test_statuses_are_scrubbed_on_deploy_get_and_list() -> None:
    provider = guarded("status")
    statuses = [await provider.deploy(request())]
    statuses.append(await provider.get("uid-1"))
    statuses += await provider.list("vk")
    for status in statuses:
        assert_clean(status.message)
        assert_clean(status.containers[0].message)
        assert PLAIN in status.message  # a plain value is still shown


async def test_a_pod_without_secrets_keeps_its_messages() -> None:
    provider = guarded("status")
    await provider.deploy(request("uid-1"))
    other = request("uid-2").model_copy(update={"containers": [Container(name="c", image="b")]})
    other = other.model_copy(update={"registry_credentials": []})
    status = await provider.deploy(other)
    assert REDACTED not in status.message


async def test_errors_of_calls_about_no_pod_use_every_pods_secrets() -> None:
    provider = guarded("delete")
    inner = provider.inner
    assert isinstance(inner, EchoingProvider)
    inner.mode = "status"
    await provider.deploy(request())
    inner.mode = "delete"
    with pytest.raises(Transient) as caught:
        await provider.delete("uid-1")
    assert_clean(str(caught.value))


async def test_secrets_are_forgotten_after_delete_once_the_deployment_is_gone() -> None:
    provider = guarded("status")
    await provider.deploy(request())
    assert len(provider.secrets) == 1
    await provider.delete("uid-1")
    assert len(provider.secrets) == 1  # a deleting deployment may still report
    await provider.list("vk")
    assert len(provider.secrets) == 0
    await provider.deploy(request())
    await provider.inner.delete("uid-1")  # gone behind the guard's back
    with pytest.raises(NotFound):
        await provider.get("uid-1")
    assert len(provider.secrets) == 1
    await provider.list("vk")
    assert len(provider.secrets) == 0


async def test_a_refused_deploy_is_forgotten_after_the_next_list() -> None:
    provider = guarded("invalid")
    with pytest.raises(InvalidRequest):
        await provider.deploy(request())
    assert len(provider.secrets) == 1
    await provider.list("vk")
    assert len(provider.secrets) == 0


def test_secret_book_without_secrets_passes_statuses_through_unchanged() -> None:
    book = SecretBook()
    status = DeploymentStatus(uid="u", phase=Phase.RUNNING, message="hello")
    assert book.status(status) is status
