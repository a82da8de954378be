"""The scheduler's selector predicates, evaluated on informer caches: node selector and
required node affinity, required inter-pod affinity and anti-affinity, and hard topology spread.

The wave planner (``vkprovider.gate.wave``) must agree with kube-scheduler on whether a
replica's replacement would bind locally; a looser check (the Descheduler's ``nodeFit``: no
spread, no pod affinity, no ``matchFields``) is what made the gate and the Descheduler fight. The
semantics follow ``k8s.io/component-helpers`` and the scheduler plugins ``NodeAffinity``,
``InterPodAffinity`` and ``PodTopologySpread`` (v1.36). What cannot be evaluated here (a
``namespaceSelector`` that selects by namespace labels) raises :class:`Unevaluable`, and the
caller counts the pod as "does not fit": a wrong "no" keeps a replica out one more wave, a wrong
"yes" evicts it to sit Pending.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from vkprovider.gate.selector import tolerates

JSON = Mapping[str, Any]


class Unevaluable(Exception):
    """A predicate needs data the gate does not have; treat the pod as not fitting."""


def _labels(obj: JSON) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _expression(expr: JSON, value: str | None, present: bool) -> bool:
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        try:
            have, want = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False  # an unknown operator matches nothing (the API refuses it anyway)


def label_selector_matches(selector: JSON | None, labels: Mapping[str, str]) -> bool:
    """``metav1.LabelSelector``: ``None`` selects nothing, ``{}`` selects everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(
        _expression(e, labels.get(e.get("key", "")), e.get("key", "") in labels)
        for e in selector.get("matchExpressions") or []
    )


def node_term_matches(term: JSON | None, node: JSON) -> bool:
    """One ``NodeSelectorTerm``: its label expressions and field expressions all hold. An empty
    or null term matches no node (the API's rule, not "no constraint"); ``metadata.name`` is the
    only field, and only ``In``/``NotIn`` apply to it (what the API accepts in ``matchFields``)."""
    term = term or {}
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False
    labels = _labels(node)
    name = (node.get("metadata") or {}).get("name", "")
    for expr in exprs:
        key = expr.get("key", "")
        if not _expression(expr, labels.get(key), key in labels):
            return False
    for expr in fields:
        if (
            expr.get("key") != "metadata.name"
            or expr.get("operator") not in ("In", "NotIn")
            or not _expression(expr, name, True)
        ):
            return False
    return True


def node_affinity_admits(pod: JSON, node: JSON) -> bool:
    """``spec.nodeSelector`` and required node affinity (terms ORed) admit ``node``."""
    spec = pod.get("spec") or {}
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return True
    return any(node_term_matches(t, node) for t in required.get("nodeSelectorTerms") or [])


def _with_label_keys(selector: JSON | None, pod: JSON, term: JSON) -> JSON | None:
    """``matchLabelKeys``/``mismatchLabelKeys`` folded into the selector, as the API server does."""
    keys, mismatch = term.get("matchLabelKeys") or [], term.get("mismatchLabelKeys") or []
    if selector is None or not (keys or mismatch):
        return selector
    labels = _labels(pod)
    extra = [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys if k in labels]
    extra += [{"key": k, "operator": "NotIn", "values": [labels[k]]} for k in mismatch if k in labels]
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or []), *extra]}


def _namespaces(term: JSON, owner: JSON) -> set[str] | None:
    """The namespaces a pod-affinity term looks in; ``None`` for all of them."""
    listed = set(term.get("namespaces") or [])
    ns_selector = term.get("namespaceSelector")
    if ns_selector is not None:
        if ns_selector.get("matchLabels") or ns_selector.get("matchExpressions"):
            raise Unevaluable("a namespaceSelector on namespace labels")
        return None  # {} selects every namespace
    return listed or {(owner.get("metadata") or {}).get("namespace", "")}


def _term_selects(term: JSON, owner: JSON, other: JSON) -> bool:
    """``term`` (a pod-affinity term of ``owner``) selects pod ``other``."""
    namespaces = _namespaces(term, owner)
    if namespaces is not None and (other.get("metadata") or {}).get("namespace", "") not in namespaces:
        return False
    return label_selector_matches(_with_label_keys(term.get("labelSelector"), owner, term), _labels(other))


def _required(pod: JSON, kind: str) -> list[JSON]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def has_anti_affinity(pod: JSON) -> bool:
    return bool(_required(pod, "podAntiAffinity"))


Placed = Sequence[tuple[JSON, JSON]]  #: (pod, the node it is on)


def pod_affinity_admits(pod: JSON, node: JSON, placed: Placed) -> bool:
    """Required pod affinity and anti-affinity of ``pod`` on ``node``, and the required
    anti-affinity of every placed pod toward it (the scheduler's ``InterPodAffinity`` filter)."""
    labels = _labels(node)
    for other, where in placed:  # existing pods' anti-affinity
        for term in _required(other, "podAntiAffinity"):
            key = term.get("topologyKey", "")
            if key in labels and _labels(where).get(key) == labels[key] and _term_selects(term, other, pod):
                return False
    for term in _required(pod, "podAntiAffinity"):
        key = term.get("topologyKey", "")
        if key not in labels:
            continue
        if any(_labels(w).get(key) == labels[key] and _term_selects(term, pod, o) for o, w in placed):
            return False
    terms = _required(pod, "podAffinity")
    if not terms:
        return True
    if all(t.get("topologyKey", "") in labels for t in terms) and all(
        any(
            _labels(w).get(t["topologyKey"]) == labels[t["topologyKey"]] and _term_selects(t, pod, o)
            for o, w in placed
        )
        for t in terms
    ):
        return True
    # the first pod of a group that selects itself may go anywhere its keys exist
    nobody = not any(_term_selects(t, pod, o) for t in terms for o, _ in placed)
    self_match = all(_term_selects(t, pod, pod) for t in terms)
    return nobody and self_match and all(t.get("topologyKey", "") in labels for t in terms)


def _tolerated(pod: JSON, node: JSON) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    return all(
        tolerates(tolerations, t)
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
    )


def spread_check(pod: JSON, nodes: Iterable[JSON], placed: Placed) -> Callable[[JSON], bool]:
    """A check that every ``DoNotSchedule`` topology spread constraint holds with ``pod`` on a
    given node; the domain counts are computed once, here, for every node to be tried.

    Domains are the nodes (all of them, the virtual node included) that carry the key and pass
    the pod's node affinity (``nodeAffinityPolicy: Honor``, the default) and, only with
    ``nodeTaintsPolicy: Honor``, its tolerations; terminating pods are not counted."""
    namespace = (pod.get("metadata") or {}).get("namespace", "")
    all_nodes = list(nodes)
    rules: list[tuple[str, Counter[str], int, int, int]] = []  # key, counts, min, own, maxSkew
    for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
        if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
            continue
        key = c.get("topologyKey", "")
        selector = _with_label_keys(c.get("labelSelector"), pod, c)
        eligible = [
            n
            for n in all_nodes
            if key in _labels(n)
            and (c.get("nodeAffinityPolicy", "Honor") != "Honor" or node_affinity_admits(pod, n))
            and (c.get("nodeTaintsPolicy", "Ignore") != "Honor" or _tolerated(pod, n))
        ]
        domains = {_labels(n)[key] for n in eligible}
        eligible_names = {(n.get("metadata") or {}).get("name") for n in eligible}
        counts: Counter[str] = Counter()
        for other, where in placed:
            meta = other.get("metadata") or {}
            if meta.get("deletionTimestamp") or meta.get("namespace", "") != namespace:
                continue
            if (where.get("metadata") or {}).get("name") not in eligible_names:
                continue
            if label_selector_matches(selector, _labels(other)):
                counts[_labels(where)[key]] += 1
        minimum = min((counts[d] for d in domains), default=0)
        if len(domains) < int(c.get("minDomains") or 1):
            minimum = 0
        own = 1 if label_selector_matches(selector, _labels(pod)) else 0
        rules.append((key, counts, minimum, own, int(c.get("maxSkew") or 1)))

    def admits(node: JSON) -> bool:
        labels = _labels(node)
        for key, counts, minimum, own, max_skew in rules:
            if key not in labels or counts[labels[key]] + own - minimum > max_skew:
                return False
        return True

    return admits


def spread_admits(pod: JSON, node: JSON, nodes: Iterable[JSON], placed: Placed) -> bool:
    """:func:`spread_check` for one node."""
    return spread_check(pod, nodes, placed)(node)
