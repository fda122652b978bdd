"""Cilium label strings, the stable labels a selector may use, and workload names.

Only labels that survive pod restarts and rollouts may appear in a selector: a selector on
``pod-template-hash`` would match nothing after the next rollout.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import attrs

NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
CLUSTER_LABEL = "io.cilium.k8s.policy.cluster"
"""The ClusterMesh cluster of an endpoint, as policy selectors name it."""
NAMESPACE_LABELS_PREFIX = "io.cilium.k8s.namespace.labels."
"""Keys of the namespace's own labels on a pod (a selector on them spans namespaces)."""
PRIORITY_KEYS = ("app.kubernetes.io/name", "app.kubernetes.io/component", "app")
UNSTABLE_KEYS = frozenset(
    {
        "pod-template-hash",
        "controller-revision-hash",
        "statefulset.kubernetes.io/pod-name",
        "apps.kubernetes.io/pod-index",
        "job-name",
        "controller-uid",
        "batch.kubernetes.io/job-name",
        "batch.kubernetes.io/controller-uid",
        NAMESPACE_LABEL,
    }
)
UNSTABLE_PREFIXES = ("io.cilium.k8s.", "batch.kubernetes.io/")

LabelItems = tuple[tuple[str, str], ...]
"""Selected labels as sorted ``(key, value)`` pairs: hashable and ordered."""


@attrs.frozen(slots=True)
class Label:
    source: str
    key: str
    value: str


def parse_label(text: str) -> Label:
    """Parse ``source:key=value`` the way Cilium does (``$`` prefix means reserved)."""
    if text.startswith("$"):
        source, rest = "reserved", text[1:]
    else:
        source, sep, rest = text.partition(":")
        if not sep:
            source, rest = "unspec", text
    key, _, value = rest.partition("=")
    return Label(source=source, key=key, value=value)


@functools.lru_cache(maxsize=1 << 16)
def is_stable_key(key: str) -> bool:
    return key not in UNSTABLE_KEYS and not key.startswith(UNSTABLE_PREFIXES)


def stable_labels(labels: Iterable[str]) -> dict[str, str]:
    """All ``k8s:`` labels a selector may rely on (a new dict: the caller may change it)."""
    if isinstance(labels, tuple):  # an endpoint's: the same few thousand, asked again
        return dict(_stable_items(labels))
    return dict(_stable_items(tuple(labels)))


@functools.lru_cache(maxsize=1 << 16)
def _stable_items(labels: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for text in labels:
        if not text.startswith("k8s:"):
            continue
        key, _, value = text[4:].partition("=")
        if key and is_stable_key(key):
            out[key] = value
    return tuple(out.items())


def select_labels(labels: Iterable[str]) -> LabelItems:
    """The labels cpg selects an endpoint by: the first priority key present, else every
    stable label. Empty when the endpoint has no stable label (it cannot be selected)."""
    stable = stable_labels(labels)
    for key in PRIORITY_KEYS:
        value = stable.get(key)
        if value is not None:
            return ((key, value),)
    return tuple(sorted(stable.items()))


_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_problem(key: str, value: str) -> str | None:
    """Why Kubernetes would refuse ``key: value`` in a selector (ARCHITECTURE §D20), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"the key prefix {prefix!r} is not a DNS subdomain"
    if len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        return f"the key {key!r} is not a label name"
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        return f"the value {value!r} of {name} is not a label value"
    return None


_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def namespace_problem(namespace: str) -> str | None:
    """Why ``namespace`` is no Kubernetes namespace name (a DNS-1123 label), or None."""
    if len(namespace) > 63 or not _NAMESPACE.fullmatch(namespace):
        return f"the namespace {namespace[:80]!r} is not a Kubernetes namespace name"
    return None


def cluster_problem(cluster: str) -> str | None:
    """Why a ClusterMesh cluster name cannot be a selector's cluster label value, or None."""
    if len(cluster) > 63 or not _LABEL_VALUE.fullmatch(cluster):
        return f"the cluster name {cluster[:80]!r} is not a label value"
    return None


def selector_problem(selected: LabelItems) -> str | None:
    """The first label of a selector Kubernetes would refuse, or None."""
    for key, value in selected:
        problem = label_problem(key, value)
        if problem is not None:
            return problem
    return None


def workload_name(selected: LabelItems) -> str:
    """Human name of the workload a selector picks: the priority label's value, else the
    sorted label values joined by ``-`` (at most 63 characters). "" when nothing is selected."""
    if not selected:
        return ""
    if len(selected) == 1 and selected[0][0] in PRIORITY_KEYS:
        return selected[0][1]
    parts = sorted(value or key for key, value in selected)
    return "-".join(parts)[:63].strip("-.") or "-".join(parts)[:63]


def reserved_names(labels: Iterable[str]) -> tuple[str, ...]:
    """Names of the ``reserved:`` labels, in label order."""
    out = []
    for text in labels:
        if text.startswith("reserved:"):
            out.append(text[9:].partition("=")[0])
        elif text.startswith("$"):
            out.append(text[1:].partition("=")[0])
    return tuple(out)


def format_labels(items: LabelItems) -> str:
    return ",".join(f"{k}={v}" for k, v in items)
