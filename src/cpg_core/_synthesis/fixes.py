"""The fix for traffic a proposal would break, as a reviewer would accept it: narrow the
policy by the label that tells the pods it was made for from the others, or add the rule, and
either way the YAML to paste (ARCHITECTURE §D23)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set as AbstractSet

import attrs

from cpg_core._base.flow import Direction, Endpoint, Flow
from cpg_core._base.l7 import dns_name, http_method, path_regex, valid_dns_name
from cpg_core._base.labels import is_stable_key, label_problem, stable_labels
from cpg_core._base.rules import DNS, HTTP, rules_from_atoms
from cpg_core._base.yaml_text import emit
from cpg_core._flows.synthesis import Resolved, Resolver, endpoint_kind
from cpg_core._policy.write import rule_to_dict, selector_of, subject_document

DISCRIMINATORS = (
    "version",
    "app.kubernetes.io/version",
    "app.kubernetes.io/component",
    "app.kubernetes.io/instance",
    "role",
    "tier",
    "component",
    "track",
)
"""Labels whose value tells the pods of one app apart, best first."""

_MARKERS = (
    "inject",
    "tlsmode",
    "helm.sh/",
    "managed-by",
    "heritage",
    "chart",
    "pod-template-generation",
    "revision-hash",
)
"""Parts of keys that injectors and controllers set: they say how a pod was made, not what it
is, and flip when a sidecar or a chart changes."""


def is_marker(key: str) -> bool:
    lowered = key.lower()
    return any(part in lowered for part in _MARKERS)


def discriminator(
    intended: Iterable[Endpoint], broken: Mapping[str, str], selector: Mapping[str, str]
) -> tuple[str, str] | None:
    """The label every intended pod has with one value and the broken pod lacks (or has with
    another): a well-known discriminator first, never an injection or controller marker."""
    shared: dict[str, str] | None = None
    for endpoint in intended:
        labels = stable_labels(endpoint.labels)
        shared = (
            dict(labels)
            if shared is None
            else {k: v for k, v in shared.items() if labels.get(k) == v}
        )
    choices = [
        (key, value)
        for key, value in (shared or {}).items()
        if key not in selector
        and broken.get(key) != value
        and is_stable_key(key)
        and not is_marker(key)
    ]
    return _best(choices)


def _best(choices: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The label that tells pods apart best: a well-known discriminator first."""
    if not choices:
        return None

    def rank(item: tuple[str, str]) -> tuple[int, str]:
        key = item[0]
        return (DISCRIMINATORS.index(key) if key in DISCRIMINATORS else len(DISCRIMINATORS), key)

    return min(choices, key=rank)


def narrowed_yaml(selector: Mapping[str, str], key: str, value: str) -> str:
    """The endpointSelector with the discriminating label added."""
    labels = {**selector, key: value}
    return "\n".join(emit(subject_document(selector_of(labels), under_spec=True))) + "\n"


def exclusion(
    intended: Iterable[Endpoint],
    broken: Mapping[str, str],
    selected: Iterable[str] = (),
    seen: AbstractSet[str] | None = None,
) -> tuple[str, str] | None:
    """The label the broken pod has that no pod the policies were made for has with that
    value (``version: canary`` beside pods without it): ``key NotIn (value)`` on their
    selectors leaves it out as it is today and keeps every intended pod. A well-known
    discriminator first, never an injection or controller marker; None when no label tells
    them apart (or nothing says which pods the policies were made for). ``seen``: every
    label of the (non-empty) intended pods, when the caller has gathered them already."""
    if seen is None:
        gathered: set[str] = set()
        pods = False
        for endpoint in intended:
            gathered.update(endpoint.labels)
            pods = True
        if not pods:
            return None
        seen = gathered
    keys = set(selected)
    choices = [
        (key, value)
        for key, value in broken.items()
        if key not in keys
        and is_stable_key(key)
        and not is_marker(key)
        and f"k8s:{key}={value}" not in seen
        and label_problem(key, value) is None  # a value Kubernetes refuses: the rule fix
    ]
    return _best(choices)


def narrowing_yaml(narrowed: Iterable[tuple[str, object]]) -> str:
    """Each ``(policy, narrowed endpointSelector)`` as YAML to paste, its policy above it."""
    lines: list[str] = []
    for where, selector in narrowed:
        lines.append(f"# {where}")
        lines += emit(subject_document(selector))
    return "\n".join(lines) + "\n" if lines else ""


def unknown_pod_peer(flow: Flow) -> bool:
    """Whether the flow's peer is a pod Hubble gave the world identity (it names the pod but
    not its labels): no rule can name it, and a CIDR rule never selects a pod (§D22)."""
    peer = flow.source if flow.direction == Direction.INGRESS else flow.destination
    return bool(peer.pod_name) and endpoint_kind(peer).world


def rule_yaml(flow: Flow) -> str:
    """The allow rule cpg would write for ``flow``, under its direction's key; "" when no
    rule can express it (no port, a world peer without an IP, a pod whose labels Hubble
    left out…)."""
    if unknown_pod_peer(flow):
        return ""
    resolved = Resolver().resolve(flow)
    if not isinstance(resolved, Resolved):
        return ""
    atom = resolved.atom
    l7 = flow.l7
    if l7 is not None and l7.http is not None and l7.http.method.strip():
        # an HTTP request: its own rule, so no L4 rule ever lands beside an L7 one (§D21)
        detail = (HTTP, http_method(l7.http.method), path_regex(l7.http.url))
        atom = attrs.evolve(atom, l7=detail)
    elif l7 is not None and l7.dns is not None and valid_dns_name(dns_name(l7.dns.query)):
        atom = attrs.evolve(atom, l7=(DNS, dns_name(l7.dns.query)))
    (rule,) = rules_from_atoms([atom])
    section = {atom.direction: [rule_to_dict(rule, resolved.target.namespace)]}
    return "\n".join(emit(section)) + "\n"
