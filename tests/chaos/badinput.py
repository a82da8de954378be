"""Hypothesis strategies for pod specs an operator could plausibly apply, most of them wrong.

Each field is drawn from a mix of good values and the mistakes people make: typos in enums,
quantities that do not parse (``"1.5.3"``, ``"-2Gi"``, ``"1e400"``), fractional or negative GPU
counts, wrong JSON types where objects or lists belong, references to ConfigMaps and Secrets
that do not exist, unsupported features (host network, privileged, host ports), placement
annotations with bad values, and strings that are huge or exotic. The live test also uses it,
so a shape is valid for the API server whenever the server's own validation allows it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

JSON = dict[str, Any]

GPU_KEY = "nvidia.com/gpu"
EXISTING = {"config": {"mode": "fast"}, "creds": {"token": b"hunter2-secret"}}

weird_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "x" * 300, "naïve-ünïcode", "a\nb", "../../etc", "$(UNSET)", "🚀"]),
)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Good values nine times in ten: each spec has a dozen fields, and a spec with one bad
    field is refused, so uniformly bad fields would leave almost nothing to place."""
    return st.sampled_from([good] * 9 + [bad]).flatmap(lambda chosen: chosen)


quantity = mostly(
    st.sampled_from(["1", "500m", "2Gi", "0.5", "64Gi", "16"]),
    st.one_of(
        st.sampled_from(["1.5.3", "-2Gi", "1e400", "abc", "", "9" * 40]),
        st.integers(-5, 10**6),
        st.floats(allow_nan=True, allow_infinity=True),
        st.lists(st.integers(), max_size=2),
    ),
)
gpu_count = mostly(
    st.sampled_from(["1", "1", "2", "8", 1]),
    st.one_of(st.sampled_from(["0", "-1", "1.5", "one", "1000000", ""]), st.integers(-3, 64)),
)
gpu_annotation = st.sampled_from(
    ["H100-SXM-80GB", "h100", "NVIDIA A100 80GB", "L4", "B200", "RTX-9999", "", "h100,a100", "🚀"]
)
placement_annotations = st.dictionaries(
    st.sampled_from(
        [
            "vkprovider.io/providers",
            "vkprovider.io/providers-deny",
            "vkprovider.io/regions",
            "vkprovider.io/gpu-type",
            "vkprovider.io/max-price",
            "vkprovider.io/spot",
            "vkprovider.io/spread-max-share",
            "vkprovider.io/unknown-key",
        ]
    ),
    st.sampled_from(["cheap", "cheap,premium", "nope", "", "2.5", "-1", "abc", "true", "false", "1.5", "0"]),
    max_size=3,
)


def env_entry() -> st.SearchStrategy[Any]:
    ref = st.fixed_dictionaries(
        {
            "name": st.sampled_from(["config", "creds", "missing-map", ""]),
            "key": st.sampled_from(["mode", "token", "nokey"]),
        },
        optional={"optional": st.booleans()},
    )
    return st.one_of(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["MODE", "A_B", "1BAD", "", "x y"]), "value": weird_text}
        ),
        st.fixed_dictionaries(
            {"name": st.just("FROM_MAP"), "valueFrom": st.fixed_dictionaries({"configMapKeyRef": ref})}
        ),
        st.fixed_dictionaries(
            {"name": st.just("FROM_SECRET"), "valueFrom": st.fixed_dictionaries({"secretKeyRef": ref})}
        ),
        st.fixed_dictionaries(
            {"name": st.just("POD"), "valueFrom": st.just({"fieldRef": {"fieldPath": "metadata.nosuch"}})}
        ),
        st.just("not-an-object"),
    )


def container() -> st.SearchStrategy[Any]:
    resources = st.fixed_dictionaries(
        {},
        optional={
            "limits": st.fixed_dictionaries(
                {}, optional={GPU_KEY: gpu_count, "cpu": quantity, "memory": quantity}
            ),
            "requests": st.fixed_dictionaries({}, optional={"cpu": quantity, "memory": quantity}),
        },
    )
    port = st.fixed_dictionaries(
        {
            "containerPort": mostly(
                st.integers(1, 65535), st.one_of(st.integers(-1, 0), st.just(70000), st.just("http"))
            )
        },
        optional={
            "protocol": mostly(st.just("TCP"), st.sampled_from(["UDP", "tcp", "HTTP"])),
            "hostPort": mostly(st.just(0), st.just(8080)),
        },
    )
    good = st.fixed_dictionaries(
        {
            "name": st.sampled_from(["server", "c", "side"]),
            "image": st.sampled_from(["img:1", "ghcr.io/a/b@sha256:" + "0" * 64]),
        },
        optional={
            "resources": resources,
            "env": st.lists(env_entry(), max_size=3),
            "ports": st.lists(port, max_size=2),
            "command": mostly(st.lists(weird_text, max_size=2), st.just("sh -c run")),
            "args": st.lists(st.sampled_from(["$(MODE)", "--x", "$$(ESC)"]), max_size=2),
            "securityContext": st.fixed_dictionaries(
                {}, optional={"privileged": mostly(st.just(False), st.just(True))}
            ),
            "workingDir": weird_text,
        },
    )
    return mostly(good, st.sampled_from([{"name": "noimage"}, ["a", "list"], None]))


@st.composite
def pod_specs(draw: st.DrawFn, uid: str = "uid-fuzz") -> JSON:
    containers = draw(mostly(st.lists(container(), min_size=1, max_size=2), st.sampled_from([[], "oops"])))
    spec: JSON = {"containers": containers}
    spec.update(
        draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "restartPolicy": mostly(
                        st.sampled_from(["Always", "OnFailure", "Never"]),
                        st.sampled_from(["always", "Sometimes"]),
                    ),
                    "hostNetwork": mostly(st.just(False), st.just(True)),
                    "initContainers": st.lists(container(), max_size=1),
                    "imagePullSecrets": st.lists(
                        st.fixed_dictionaries({"name": st.sampled_from(["creds", "nope"])}), max_size=1
                    ),
                    "volumes": st.lists(
                        st.one_of(
                            st.just({"name": "cfg", "configMap": {"name": "config"}}),
                            st.just({"name": "cfg", "configMap": {"name": "missing-map"}}),
                            st.just({"name": "scratch", "emptyDir": {}}),
                            st.just({"name": "host", "hostPath": {"path": "/"}}),
                        ),
                        max_size=2,
                    ),
                },
            )
        )
    )
    annotations = draw(placement_annotations)
    if draw(st.booleans()):
        annotations["vkprovider.io/gpu-type"] = draw(gpu_annotation)
    metadata: JSON = {
        "name": draw(st.sampled_from(["p", "pod-1", "x" * 70])),
        "namespace": "fuzz",
        "uid": uid,
    }
    if annotations:
        metadata["annotations"] = annotations
    if draw(st.booleans()):
        metadata["labels"] = draw(st.dictionaries(st.sampled_from(["app", "tier"]), weird_text, max_size=2))
    return {"metadata": metadata, "spec": spec}
