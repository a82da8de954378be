"""Render the kustomizations under deploy/ with the pinned kubectl, and the checked-in output.

``deploy/rendered/<target>.yaml`` is what ``kubectl kustomize`` makes of each target; the tests
compare the two, so a change to a manifest shows up in review as a change to what is applied.
Regenerate after editing a manifest:

    .venv/bin/python -m tests.unit.deploy.rendering
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from vkprovider.devcluster.build import DESCHEDULER_VERSION, Toolchain
from vkprovider.devcluster.kueue_build import go_module_dir

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
RENDERED = DEPLOY / "rendered"
#: kustomize target -> its directory (the components need their helpers' files; see docs)
TARGETS = {
    "base": DEPLOY / "base",
    "demo": DEPLOY / "overlays" / "demo",
    "runpod": DEPLOY / "overlays" / "runpod",
}
#: every rendered target: the service's, and the Descheduler of the return path (kube-system)
RENDERED_TARGETS = {**TARGETS, "descheduler": DEPLOY / "descheduler"}
#: deploy/descheduler's upstream, as users fetch it (kustomize's remote form: repo//path?ref=tag)
UPSTREAM_DESCHEDULER = (
    f"https://github.com/kubernetes-sigs/descheduler//kubernetes/deployment?ref={DESCHEDULER_VERSION}"
)
SERVICE_ACCOUNT = ("vkprovider-system", "vkprovider")


def kubectl() -> str | None:
    """The pinned kubectl of the dev cluster's toolchain (else one on PATH), or None."""
    pinned = Toolchain.default().binary("kubectl")
    if pinned.is_file():
        return str(pinned)
    return shutil.which("kubectl")


def upstream_descheduler() -> Path:
    """The same manifests from the pinned Go module (sigs.k8s.io/descheduler at the same tag):
    this machine has no GitHub, and nothing of upstream is copied into the repository."""
    return go_module_dir("sigs.k8s.io/descheduler", DESCHEDULER_VERSION) / "kubernetes" / "deployment"


def with_local_upstream(directory: Path, into: Path) -> Path:
    """A copy of ``directory`` (a kustomization naming UPSTREAM_DESCHEDULER) in ``into`` whose
    remote resource reads the module's copy instead; everything else is byte for byte the same."""
    text = (directory / "kustomization.yaml").read_text()
    line = f"  - {UPSTREAM_DESCHEDULER}\n"
    if text.count(line) != 1:
        raise RuntimeError(f"{directory}/kustomization.yaml must name {UPSTREAM_DESCHEDULER} once")
    shutil.copytree(directory, into, dirs_exist_ok=True)
    local = os.path.relpath(upstream_descheduler(), into)  # kustomize refuses absolute paths
    (into / "kustomization.yaml").write_text(text.replace(line, f"  - {local}\n"))
    return into


def render(target: str | Path) -> str:
    if target == "descheduler":
        with tempfile.TemporaryDirectory() as tmp:
            return render(with_local_upstream(RENDERED_TARGETS["descheduler"], Path(tmp) / "descheduler"))
    directory = RENDERED_TARGETS[target] if isinstance(target, str) else target
    binary = kubectl()
    if binary is None:
        raise RuntimeError("no kubectl: run `make cluster-build`")
    done = subprocess.run(
        [binary, "kustomize", str(directory)], capture_output=True, text=True, check=False, timeout=60
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {directory} failed: {done.stderr.strip()}")
    return done.stdout


def objects(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> Iterator[dict[str, Any]]:
    for doc in docs:
        if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name):
            yield doc


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = list(find(docs, kind, name))
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def service_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``vkprovider serve`` config in the rendered ConfigMap the Deployment mounts."""
    deployment = one(docs, "Deployment", "vkprovider")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    cm_name = volumes["config"]["configMap"]["name"]
    config: dict[str, Any] = yaml.safe_load(one(docs, "ConfigMap", cm_name)["data"]["config.yaml"])
    return config


def with_component(component: Path, directory: Path) -> str:
    """A kustomization (to write in ``directory``) of the base plus the ``component`` directory."""
    return with_components(directory, component)


def with_components(directory: Path, *components: Path) -> str:
    """A kustomization (to write in ``directory``) of the base plus ``components`` (kustomize
    wants relative paths; no component: the base alone)."""
    base = os.path.relpath(TARGETS["base"], directory)
    text = f"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {base}\n"
    if components:
        text += "components:\n" + "".join(f"  - {os.path.relpath(c, directory)}\n" for c in components)
    return text


def main() -> int:
    RENDERED.mkdir(exist_ok=True)
    for target in RENDERED_TARGETS:
        (RENDERED / f"{target}.yaml").write_text(render(target))
        print(f"wrote deploy/rendered/{target}.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
