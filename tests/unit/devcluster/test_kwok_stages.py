"""The dev cluster's one kwok pod stage set: kwok's own "fast" stages plus delays by annotation,
used alike by ``pod_delays=True`` and ``kueue=True`` (and both at once)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from vkprovider.devcluster import kwok
from vkprovider.devcluster.build import KWOK_VERSION


def stages() -> dict[str, Any]:
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(kwok.POD_STAGES)}


def test_ready_and_complete_wait_for_their_annotations() -> None:
    found = stages()
    assert set(found) == {"pod-ready", "pod-complete", "pod-delete", "pod-delete-after-grace"}
    ready, complete = found["pod-ready"]["spec"]["delay"], found["pod-complete"]["spec"]["delay"]
    assert ready["durationMilliseconds"] == complete["durationMilliseconds"] == 0  # no annotation: at once
    assert (
        ready["durationFrom"]["expressionFrom"] == f'.metadata.annotations["{kwok.READY_DELAY_ANNOTATION}"]'
    )
    assert (
        complete["durationFrom"]["expressionFrom"]
        == f'.metadata.annotations["{kwok.COMPLETE_DELAY_ANNOTATION}"]'
    )
    assert found["pod-delete"]["spec"]["next"]["delete"] is True


def test_only_job_pods_complete_and_finished_pods_are_not_ready() -> None:
    complete = stages()["pod-complete"]["spec"]
    owner = [e for e in complete["selector"]["matchExpressions"] if "ownerReferences" in e["key"]]
    assert owner == [{"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]}]
    template = complete["next"]["statusTemplate"]
    assert "phase: Succeeded" in template
    assert 'type: Ready, status: "False", reason: PodCompleted' in template


GRACE_EXPRESSION = {"key": f'.metadata.annotations["{kwok.SERVE_THROUGH_GRACE_ANNOTATION}"]'}


def test_pods_that_serve_through_their_grace_are_deleted_when_it_is_over() -> None:
    """Exactly one delete stage matches any terminating pod: at once, or at its deletionTimestamp."""
    found = stages()
    at_once, after = found["pod-delete"]["spec"], found["pod-delete-after-grace"]["spec"]
    terminating = {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
    assert at_once["selector"]["matchExpressions"] == [
        terminating,
        GRACE_EXPRESSION | {"operator": "DoesNotExist"},
    ]
    assert after["selector"]["matchExpressions"] == [terminating, GRACE_EXPRESSION | {"operator": "Exists"}]
    assert "delay" not in at_once
    assert after["delay"] == {
        "durationMilliseconds": 0,
        "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"},
    }
    assert after["next"] == at_once["next"] == {"finalizers": {"empty": True}, "delete": True}


def test_written_where_kwok_reads_it(tmp_path: Path) -> None:
    path = kwok.write_pod_stages(tmp_path)
    assert path.read_text() == kwok.POD_STAGES
    assert f"--config={path}" in kwok.args(tmp_path / "kubeconfig", 1, path)


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain (module cache)")
def test_same_selectors_and_status_fields_as_kwoks_own_fast_stages() -> None:
    """Upgrading kwok must not silently drift from its stages (readiness gates, init containers)."""
    from vkprovider.devcluster.kueue_build import go_module_dir

    fast = go_module_dir("sigs.k8s.io/kwok", KWOK_VERSION) / "kustomize/stage/pod/fast"
    ours = stages()
    for name in ("pod-ready", "pod-complete", "pod-delete"):
        upstream = yaml.safe_load((fast / f"{name}.yaml").read_text())["spec"]
        mine = ours[name]["spec"]
        expressions = mine["selector"]["matchExpressions"]
        if name == "pod-delete":  # pods that serve through their grace go to pod-delete-after-grace
            assert expressions[-1] == GRACE_EXPRESSION | {"operator": "DoesNotExist"}
            expressions = expressions[:-1]
        assert {"matchExpressions": expressions} == upstream["selector"], name
        assert mine["resourceRef"] == upstream["resourceRef"], name
        if "statusTemplate" not in upstream["next"]:
            assert mine["next"] == upstream["next"], name
            continue
        theirs, mine_t = upstream["next"]["statusTemplate"], mine["next"]["statusTemplate"]
        assert status_fields(mine_t) >= status_fields(theirs), name
        for needle in (".spec.readinessGates", ".spec.initContainers", ".spec.containers"):
            assert (needle in theirs) <= (needle in mine_t), f"{name}: {needle}"


def status_fields(template: str) -> set[str]:
    """The pod status fields a stage template writes (its top-level keys)."""
    return set(re.findall(r"^([a-zA-Z]+):", template, re.MULTILINE))
