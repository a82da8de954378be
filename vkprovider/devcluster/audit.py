"""An opt-in audit log for the dev cluster's apiserver, scoped to chosen users.

Used to prove that a deployment's RBAC is minimal: start the cluster with
``Cluster.start(..., audit_users=["system:serviceaccount:ns:sa"])``, run the service as that
user, then read ``cluster.audit_log`` and compare every (verb, resource) it was granted with the
ones it actually used. Only the named users are logged (everything else is level ``None``), at
``Metadata`` level (no bodies, so no Secret values in the log), once per request
(``ResponseComplete``; watches also log ``ResponseStarted``, which names the same request).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

POLICY_FILE = "audit-policy.yaml"
LOG_FILE = "audit.log"


def policy(users: Sequence[str]) -> dict[str, Any]:
    """An ``audit.k8s.io/v1`` Policy: ``Metadata`` for ``users``, nothing for anyone else."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {"level": "Metadata", "users": list(users)},
            {"level": "None"},
        ],
    }


def apiserver_args(workdir: Path, users: Sequence[str]) -> list[str]:
    """Write the policy under ``workdir`` and return the kube-apiserver flags that enable it."""
    policy_path = workdir / POLICY_FILE
    policy_path.write_text(yaml.safe_dump(policy(users), sort_keys=False))
    return [
        f"--audit-policy-file={policy_path}",
        f"--audit-log-path={workdir / LOG_FILE}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",  # written before the response: a test reads it right after
        "--audit-log-maxbackup=1",
        "--audit-log-maxsize=200",
    ]


@dataclass(frozen=True, order=True)
class Access:
    """One authorized request as RBAC sees it: verb, API group, resource[/subresource], namespace
    (``""`` for cluster-scoped requests) and name (``""`` for collections and creates)."""

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every audit event in the log (an absent log is empty: nothing was logged yet)."""
    if not path.is_file():
        return []
    events = []
    for line in path.read_text().splitlines():
        if line.strip():
            events.append(json.loads(line))
    return events


def accesses(events: Iterable[dict[str, Any]], user: str, decision: str = "allow") -> set[Access]:
    """The resource requests ``user`` made that the authorizer decided ``decision`` on
    (``allow``, or ``forbid``: a request the RBAC under test refused)."""
    found: set[Access] = set()
    for event in events:
        if (event.get("user") or {}).get("username") != user:
            continue
        ref = event.get("objectRef")
        if not ref:  # a non-resource URL (/version, /api): not an RBAC resource rule
            continue
        if (event.get("annotations") or {}).get("authorization.k8s.io/decision") != decision:
            continue
        resource = str(ref.get("resource") or "")
        if ref.get("subresource"):
            resource += f"/{ref['subresource']}"
        found.add(
            Access(
                verb=str(event.get("verb") or ""),
                group=str(ref.get("apiGroup") or ""),
                resource=resource,
                namespace=str(ref.get("namespace") or ""),
                name=str(ref.get("name") or ""),
            )
        )
    return found


#: a granted rule: (verb, group, resource, namespace), namespace ``*`` for a ClusterRole
Rule = tuple[str, str, str, str]


def granted_rules(docs: Iterable[dict[str, Any]]) -> set[Rule]:
    """Every (verb, group, resource, namespace) the ClusterRoles and Roles in ``docs`` grant."""
    found: set[Rule] = set()
    for doc in docs:
        if doc.get("kind") not in ("ClusterRole", "Role"):
            continue
        scope = doc["metadata"].get("namespace") or "*"
        for rule in doc.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        found.add((verb, group, resource, scope))
    return found


def unused_rules(granted: Iterable[Rule], used: Iterable[Access]) -> set[Rule]:
    """The granted rules no request in ``used`` needed (a Role's rule only counts in its namespace)."""
    seen = list(used)
    return {
        rule
        for rule in granted
        if not any((a.verb, a.group, a.resource) == rule[:3] and rule[3] in ("*", a.namespace) for a in seen)
    }
