"""Environment resolution: kubelet precedence, refs, downward API, expansion and service links."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from vkprovider.errors import InvalidRequest
from vkprovider.models import EnvVar
from vkprovider.translate import MissingReference, Translation, translate_pod

PodFactory = Callable[..., dict[str, Any]]
NODE = "vk-external"


async def _translate(pod: dict[str, Any], source: Any) -> Translation:
    return await translate_pod(pod, node_name=NODE, source=source)


def _env(t: Translation, container: int = 0) -> dict[str, EnvVar]:
    return {e.name: e for e in t.request.containers[container].env}


async def test_env_from_then_env_overrides_and_secret_values_are_marked(
    pod: PodFactory, source_cls: Any
) -> None:
    source = source_cls(
        config_maps={"app": {"MODE": "prod", "LEVEL": "info"}},
        secrets={"db": {"PASSWORD": b"hunter2", "USER": b"app"}},
    )
    p = pod(
        envFrom=[{"configMapRef": {"name": "app"}}, {"secretRef": {"name": "db"}, "prefix": "DB_"}],
        env=[
            {"name": "LEVEL", "value": "debug"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "db", "key": "PASSWORD"}}},
            {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "MODE"}}},
            {"name": "EMPTY"},
        ],
    )
    env = _env(await _translate(p, source))
    assert [e.name for e in env.values()] == [
        "MODE",
        "LEVEL",
        "DB_PASSWORD",
        "DB_USER",
        "TOKEN",
        "CM",
        "EMPTY",
    ]
    assert env["LEVEL"].value == "debug"
    assert (env["DB_PASSWORD"].value, env["DB_PASSWORD"].secret) == ("hunter2", True)
    assert (env["TOKEN"].value, env["TOKEN"].secret) == ("hunter2", True)
    assert (env["CM"].value, env["CM"].secret) == ("prod", False)
    assert env["EMPTY"].value == ""
    assert "hunter2" not in repr(env)
    # each object is fetched once per translation, like the kubelet's per-pod cache
    assert source.calls.count(("secret", "serving", "db")) == 1


@pytest.mark.parametrize(
    ("ref", "reason", "fragment"),
    [
        ({"secretKeyRef": {"name": "db-creds", "key": "pw"}}, "MandatorySecretNotFound", 'secret "db-creds"'),
        ({"secretKeyRef": {"name": "db", "key": "nope"}}, "MandatorySecretKeyNotFound", 'key "nope"'),
        ({"configMapKeyRef": {"name": "gone", "key": "k"}}, "MandatoryConfigMapNotFound", 'configmap "gone"'),
        ({"configMapKeyRef": {"name": "app", "key": "nope"}}, "MandatoryConfigMapKeyNotFound", 'key "nope"'),
    ],
)
async def test_missing_mandatory_refs_fail_with_kubelet_reasons(
    pod: PodFactory, source_cls: Any, ref: dict[str, Any], reason: str, fragment: str
) -> None:
    source = source_cls(config_maps={"app": {"k": "v"}}, secrets={"db": {"pw": b"s3cr3t-value"}})
    with pytest.raises(MissingReference) as info:  # not final: the pod waits for the object
        await _translate(pod(env=[{"name": "DB_PASSWORD", "valueFrom": ref}]), source)
    assert isinstance(info.value, InvalidRequest)
    assert info.value.reason == reason
    assert fragment in info.value.message
    assert 'env DB_PASSWORD of container "server"' in info.value.message
    assert "s3cr3t-value" not in str(info.value)


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ({"secretKeyRef": {"name": "missing", "key": "pw", "optional": True}}, "OptionalSecretNotFound"),
        ({"secretKeyRef": {"name": "db", "key": "nope", "optional": True}}, "OptionalSecretKeyNotFound"),
        ({"configMapKeyRef": {"name": "missing", "key": "k", "optional": True}}, "OptionalConfigMapNotFound"),
        (
            {"configMapKeyRef": {"name": "app", "key": "nope", "optional": True}},
            "OptionalConfigMapKeyNotFound",
        ),
    ],
)
async def test_missing_optional_refs_are_warnings_and_the_var_is_skipped(
    pod: PodFactory, source_cls: Any, ref: dict[str, Any], reason: str
) -> None:
    source = source_cls(config_maps={"app": {"k": "v"}}, secrets={"db": {"pw": b"x"}})
    t = await _translate(pod(env=[{"name": "OPT", "valueFrom": ref}]), source)
    assert "OPT" not in _env(t)
    assert [w.reason for w in t.warnings] == [reason]


async def test_env_from_missing_mandatory_and_optional(pod: PodFactory, source: Any) -> None:
    with pytest.raises(MissingReference) as info:
        await _translate(pod(envFrom=[{"secretRef": {"name": "all"}}]), source)
    assert info.value.reason == "MandatorySecretNotFound"
    t = await _translate(pod(envFrom=[{"configMapRef": {"name": "all", "optional": True}}]), source)
    assert [w.reason for w in t.warnings] == ["OptionalConfigMapNotFound"]


async def test_field_refs(pod: PodFactory, source: Any) -> None:
    refs = {
        "NAME": "metadata.name",
        "NS": "metadata.namespace",
        "UID": "metadata.uid",
        "APP": "metadata.labels['app']",
        "TEAM": "metadata.annotations['team']",
        "MISSING": "metadata.labels['nope']",
        "NODE": "spec.nodeName",
        "SA": "spec.serviceAccountName",
        "HOST_IP": "status.hostIP",
        "POD_IP": "status.podIP",
    }
    env_spec = [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in refs.items()]
    env = _env(await _translate(pod(env=env_spec), source))
    values = {k: v.value for k, v in env.items()}
    assert values == {
        "NAME": "llm-0",
        "NS": "serving",
        "UID": "0b9c7a1e-1111-2222-3333-444455556666",
        "APP": "llm",
        "TEAM": "inference",
        "MISSING": "",
        "NODE": NODE,
        "SA": "llm-sa",
        "HOST_IP": "",
        "POD_IP": "",
    }


async def test_unsupported_field_path_names_the_field(pod: PodFactory, source: Any) -> None:
    env_spec = [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.hostname"}}}]
    with pytest.raises(
        InvalidRequest, match=r"spec\.containers\[0\]\.env\[0\]\.valueFrom\.fieldRef\.fieldPath"
    ):
        await _translate(pod(env=env_spec), source)


async def test_resource_field_refs_with_divisor(pod: PodFactory, source: Any) -> None:
    resources = {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"cpu": "1500m", "memory": "2Gi"}}
    env_spec = [
        {"name": "LIM_CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        {
            "name": "REQ_CPU_M",
            "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}},
        },
        {
            "name": "LIM_MEM_MI",
            "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
        },
        {"name": "REQ_MEM", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory"}}},
    ]
    env = _env(await _translate(pod(resources=resources, env=env_spec), source))
    assert {k: v.value for k, v in env.items()} == {
        "LIM_CPU": "2",  # ceil(1.5)
        "REQ_CPU_M": "250",
        "LIM_MEM_MI": "2048",
        "REQ_MEM": str(1024**3),
    }


async def test_dollar_expansion_in_env_command_and_args(pod: PodFactory, source_cls: Any) -> None:
    source = source_cls(secrets={"db": {"pw": b"pa$$"}})
    p = pod(
        env=[
            {"name": "HOST", "value": "db.local"},
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
            {"name": "URL", "value": "pg://$(HOST):5432"},
            {"name": "DSN", "value": "user:$(PW)@$(HOST)"},
            {"name": "LATER", "value": "$(DEFINED_AFTER)"},
            {"name": "ESCAPED", "value": "$$(HOST) $$ $x $("},
            {"name": "DEFINED_AFTER", "value": "late"},
        ],
        command=["serve", "--url=$(URL)"],
        args=["$(DEFINED_AFTER)", "$(UNKNOWN)", "$$(HOST)"],
    )
    t = await _translate(p, source)
    env = _env(t)
    assert env["URL"].value == "pg://db.local:5432"
    assert env["LATER"].value == "$(DEFINED_AFTER)"  # not yet defined when LATER was declared
    assert env["ESCAPED"].value == "$(HOST) $ $x $("
    assert env["DSN"].secret and not env["URL"].secret  # a value built from a secret is a secret
    container = t.request.containers[0]
    assert container.command == ["serve", "--url=pg://db.local:5432"]
    assert container.args == ["late", "$(UNKNOWN)", "$(HOST)"]


def _service(name: str, ip: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "serving"}, "spec": {"clusterIP": ip, "ports": ports}}


async def test_service_links(pod: PodFactory, source_cls: Any) -> None:
    source = source_cls(
        services=[
            _service("redis-master", "10.0.0.11", [{"name": "redis", "port": 6379, "protocol": "TCP"}]),
            _service("headless", "None", [{"port": 80}]),
            _service("dns", "10.0.0.10", [{"name": "dns", "port": 53, "protocol": "UDP"}]),
        ]
    )
    p = pod(
        env=[
            {"name": "REDIS_MASTER_SERVICE_HOST", "value": "override"},
            {"name": "R", "value": "$(DNS_PORT)"},
        ]
    )
    env = {k: v.value for k, v in _env(await _translate(p, source)).items()}
    assert env["REDIS_MASTER_SERVICE_HOST"] == "override"  # declared env wins over service links
    assert env["REDIS_MASTER_SERVICE_PORT"] == "6379"
    assert env["REDIS_MASTER_SERVICE_PORT_REDIS"] == "6379"
    assert env["REDIS_MASTER_PORT"] == "tcp://10.0.0.11:6379"
    assert env["REDIS_MASTER_PORT_6379_TCP"] == "tcp://10.0.0.11:6379"
    assert env["REDIS_MASTER_PORT_6379_TCP_PROTO"] == "tcp"
    assert env["REDIS_MASTER_PORT_6379_TCP_PORT"] == "6379"
    assert env["REDIS_MASTER_PORT_6379_TCP_ADDR"] == "10.0.0.11"
    assert env["DNS_PORT_53_UDP"] == "udp://10.0.0.10:53"
    assert env["R"] == "udp://10.0.0.10:53"  # service links are visible to $(VAR) expansion
    assert not any(k.startswith("HEADLESS_") for k in env)


async def test_service_links_disabled(pod: PodFactory, source_cls: Any) -> None:
    source = source_cls(services=[_service("web", "10.0.0.5", [{"port": 80}])])
    t = await _translate(pod(spec={"enableServiceLinks": False}), source)
    assert _env(t) == {}
    assert not any(call[0] == "services" for call in source.calls)
