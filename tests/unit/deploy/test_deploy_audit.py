"""The audit-log reading behind the RBAC-is-minimal test: what counts as a use of a rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vkprovider.devcluster import audit
from vkprovider.devcluster.audit import Access, accesses, granted_rules, read_events, unused_rules

USER = "system:serviceaccount:vkprovider-system:vkprovider"


def event(
    verb: str,
    resource: str,
    *,
    ns: str = "",
    sub: str = "",
    group: str = "",
    user: str = USER,
    decision: str = "allow",
) -> dict[str, Any]:
    ref = {"resource": resource, "namespace": ns, "apiGroup": group, "subresource": sub}
    return {
        "verb": verb,
        "user": {"username": user},
        "objectRef": {k: v for k, v in ref.items() if v},
        "annotations": {"authorization.k8s.io/decision": decision},
    }


ROLES = [
    {
        "kind": "ClusterRole",
        "metadata": {"name": "c"},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["list", "patch"]}],
    },
    {
        "kind": "Role",
        "metadata": {"name": "r", "namespace": "kube-node-lease"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["update"]}],
    },
    {"kind": "ServiceAccount", "metadata": {"name": "ignored"}},
]


def test_a_rule_nobody_used_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = [
        event("list", "pods"),
        event("patch", "pods", ns="a", sub="status"),
        event("patch", "pods", ns="a", user="someone-else"),  # not the user under test
        event("patch", "pods", ns="a", decision="forbid"),  # refused: not a use
        event("update", "leases", ns="default", group="coordination.k8s.io"),  # wrong namespace
        {"verb": "get", "user": {"username": USER}, "annotations": {}},  # /version: no objectRef
    ]
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    events = read_events(log)
    used = accesses(events, USER)
    assert Access("patch", "", "pods/status", "a") in used
    assert unused_rules(granted_rules(ROLES), used) == {
        ("patch", "", "pods", "*"),
        ("list", "", "pods/status", "*"),
        ("update", "coordination.k8s.io", "leases", "kube-node-lease"),
    }
    assert accesses(events, USER, decision="forbid") == {Access("patch", "", "pods", "a")}


def test_the_policy_logs_only_the_named_users_without_bodies(tmp_path: Path) -> None:
    args = audit.apiserver_args(tmp_path, [USER])
    assert f"--audit-log-path={tmp_path / audit.LOG_FILE}" in args
    policy = audit.policy([USER])
    assert policy["rules"][0] == {"level": "Metadata", "users": [USER]}
    assert policy["rules"][-1] == {"level": "None"}
    assert read_events(tmp_path / "absent.log") == []
