"""deploy/examples and deploy/descheduler say what docs/gate.md says they do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from vkprovider.devcluster.descheduler import POLICY_FILE, return_home_policy
from vkprovider.gate.config import TaintConfig
from vkprovider.gate.selector import tolerates
from vkprovider.gate.wave_config import ReturnHomeConfig

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def docs(name: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all((DEPLOY / "examples" / name).read_text()) if d}


def test_inference_prefers_local_bursts_out_and_is_kept_off_by_the_gate() -> None:
    manifests = docs("inference-local-first.yaml")
    spec = manifests["Deployment"]["spec"]["template"]["spec"]
    (preferred,) = spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["preference"]["matchExpressions"] == [
        {"key": "pool", "operator": "In", "values": ["local-gpu"]}
    ]
    tolerations = spec["tolerations"]
    assert tolerates(
        tolerations, {"key": "virtual-kubelet.io/provider", "value": "vkprovider", "effect": "NoSchedule"}
    )
    assert not tolerates(tolerations, TaintConfig().as_taint())
    assert "nodeSelector" not in spec
    assert manifests["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1
    assert manifests["PodDisruptionBudget"]["spec"]["selector"] == manifests["Deployment"]["spec"]["selector"]


def test_training_outranks_inference_and_takes_whole_nodes() -> None:
    classes = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all((DEPLOY / "examples" / "priority-classes.yaml").read_text())
    }
    job = docs("training-job.yaml")["Job"]["spec"]
    inference = docs("inference-local-first.yaml")["Deployment"]["spec"]["template"]["spec"]
    training_class = classes[job["template"]["spec"]["priorityClassName"]]
    inference_class = classes[inference["priorityClassName"]]
    assert training_class["value"] > inference_class["value"]
    assert inference_class["preemptionPolicy"] == "Never"
    assert job["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_the_policy_file_is_the_policy_the_tests_run() -> None:
    on_disk = yaml.safe_load(POLICY_FILE.read_text())
    assert on_disk == return_home_policy()
    (profile,) = on_disk["profiles"]
    args = {p["name"]: p["args"] for p in profile["pluginConfig"]}
    # the taint by key (v0.36 matches key or key=value), only the gate's marks (the label the
    # gate writes), emptyDir pods allowed
    assert args["RemovePodsViolatingNodeTaints"]["includedTaints"] == [TaintConfig().key]
    evictor = args["DefaultEvictor"]
    assert evictor["labelSelector"] == {"matchLabels": {ReturnHomeConfig().mark_label: "true"}}
    # no PodsWithoutPDB: v0.36 never starts its PDB informer in a looping run (policy.yaml);
    # the gate does not mark replicas without a budget instead
    assert evictor["podProtections"] == {"defaultDisabled": ["PodsWithLocalStorage"]}
    assert evictor["minPodAge"] == "2m" and evictor["nodeFit"] is True
