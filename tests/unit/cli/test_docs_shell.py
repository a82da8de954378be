"""The docs' shell blocks the image test runs (tests/image/test_docs_verbatim.py) parse into the
commands an operator would type: checked here without containers, so a docs edit that breaks
the parsing (or removes a substituted text) fails fast."""

from __future__ import annotations

import pytest

from tests.image.docs_shell import Substitution, block, commands, substitute


def test_continuations_heredocs_and_comments() -> None:
    text = (
        "# a comment\n"
        "kubectl create clusterrolebinding x \\\n  --clusterrole=y   # why\n"
        "cat > f <<'EOF'\nkey: '#not a comment'\nEOF\n"
        "kubectl get lease l -o jsonpath='{.spec.holderIdentity}'  # the pods' names\n"
    )
    assert commands(text) == [
        "kubectl create clusterrolebinding x --clusterrole=y",
        "cat > f <<'EOF'\nkey: '#not a comment'\nEOF",
        "kubectl get lease l -o jsonpath='{.spec.holderIdentity}'",
    ]


def test_a_substitution_the_docs_no_longer_allow_fails() -> None:
    with pytest.raises(AssertionError, match="no longer say"):
        substitute("kubectl apply -k x", [Substitution("registry.example.com", "localhost", "why")])


@pytest.mark.parametrize(
    ("doc", "heading", "nth", "first", "last"),
    [
        ("deploy.md", "## Install", 0, "make image-push", "kubectl apply --server-side -k deploy/descheduler"),
        ("operations.md", "**Which replica.**", 0, "LEADER=$(", ".venv/bin/vkprovider status --token-file"),
        ("deploy.md", "## Rotating a provider key", 0, "kubectl -n vkprovider-system create secret", ".venv/bin/vkprovider approve-csr"),
        ("deploy.md", "## Upgrade", 0, "make image-push", 'kubectl -n vkprovider-system exec "$LEADER" -- vkprovider status'),
        ("deploy.md", "## Uninstall", 0, "kubectl cordon vk-external", "kubectl drain vk-external"),
        ("deploy.md", "## Uninstall", 1, "kubectl get pods -A", "kubectl delete csr"),
    ],
)  # fmt: skip
def test_the_blocks_the_image_test_runs(doc: str, heading: str, nth: int, first: str, last: str) -> None:
    found = commands(block(doc, heading, nth))
    assert found[0].startswith(first) and found[-1].startswith(last), found
