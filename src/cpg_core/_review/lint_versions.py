"""``cpg lint --cilium-version``: what a document means to one Cilium release. Deprecated
fields, features that release lacks, defaults it changed, and annotations that do nothing
(ARCHITECTURE §D39). Pure: a policy in, (code, message, path) out."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cpg_core._base.cilium_version import LOCAL_CLUSTER_DEFAULT_SINCE, Version, format_version
from cpg_core._base.labels import CLUSTER_LABEL
from cpg_core._policy.acceptance import Found
from cpg_core._policy.model import (
    SECTIONS_BY_DIRECTION,
    NameMatch,
    Rule,
    Selector,
    Spec,
    label_key,
    policy_model,
)

SUPPORTED: tuple[Version, ...] = tuple((1, minor, 0) for minor in range(16, 21))
"""The Cilium releases lint knows, oldest first (1.16: the first with enableDefaultDeny)."""
NEWEST: Version = SUPPORTED[-1]

CLUSTER_MESH_ENTITY_SINCE: Version = (1, 20, 0)
MULTI_LABEL_WILDCARD_SINCE: Version = (1, 19, 0)
DEPRECATED_REQUIRES_SINCE: Version = (1, 19, 0)
KAFKA_GONE_SINCE: Version = (1, 20, 0)
"""The first release whose CRD has no Kafka rules (an unknown field: refused)."""
CLUSTER_NETWORK_POLICY_SINCE: Version = (1, 20, 0)
"""The first release that reads Kubernetes ClusterNetworkPolicy."""
AUDIT_MODE_ANNOTATION = "policy.cilium.io/audit-mode"


def milestones() -> dict[str, Version]:
    """The first release of each thing the version rules know (what the admission guard
    builds its version checks from)."""
    return {
        "requires-deprecated": DEPRECATED_REQUIRES_SINCE,
        "cluster-mesh-entity": CLUSTER_MESH_ENTITY_SINCE,
        "multi-label-wildcard": MULTI_LABEL_WILDCARD_SINCE,
        "kafka-gone": KAFKA_GONE_SINCE,
        "local-cluster-default": LOCAL_CLUSTER_DEFAULT_SINCE,
        "cluster-network-policy": CLUSTER_NETWORK_POLICY_SINCE,
    }


def parse_version(text: str) -> Version | None:
    """``1.19`` (or ``v1.19.3``) as a supported release, or None."""
    parts = text.strip().lstrip("v").split(".")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        return None
    version = (int(parts[0]), int(parts[1]), 0)
    return version if version in SUPPORTED else None


def supported_text() -> str:
    return ", ".join(format_version(v)[: -len(".0")] for v in SUPPORTED)


def version_findings(policy: Mapping[str, Any], version: Version) -> list[Found]:
    """What ``policy`` means to Cilium ``version`` that the newest schema does not say."""
    shown = format_version(version)[: -len(".0")]
    found: list[Found] = []
    meta = policy.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if isinstance(annotations, Mapping) and AUDIT_MODE_ANNOTATION in annotations:
        found.append(
            (
                "CPG032",
                f"the annotation {AUDIT_MODE_ANNOTATION} does nothing: Cilium has no per-policy "
                "audit mode (policy-audit-mode is an agent or endpoint setting)",
                ("metadata", "annotations", AUDIT_MODE_ANNOTATION),
            )
        )
    for _spec, rule in _rules(policy):
        found += _peer_version_findings(rule, version, shown)
        if rule.section == "egress":
            for fqdn in rule.fqdns:
                found += _wildcard(fqdn, version, shown)
        found += _l7_version_findings(rule, version, shown)
    return found + _cluster_scope_findings(policy, version, shown)


def _rules(policy: Mapping[str, Any]) -> Iterator[tuple[Spec, Rule]]:
    for spec in policy_model(policy).specs:
        for section in SECTIONS_BY_DIRECTION:
            for rule in spec.rules(section):
                yield spec, rule


def _peer_version_findings(rule: Rule, version: Version, shown: str) -> list[Found]:
    """Deprecated requirement peers and entities a release does not have."""
    found: list[Found] = []
    for key in rule.requires_fields_written:
        if version >= DEPRECATED_REQUIRES_SINCE:
            found.append(
                (
                    "CPG030",
                    f"{key} is deprecated in Cilium {shown} and being removed: select the "
                    "peers with fromEndpoints/toEndpoints instead",
                    (*rule.path, key),
                )
            )
    for key, n, entity in rule.entities_written:
        if entity == "cluster-mesh" and version < CLUSTER_MESH_ENTITY_SINCE:
            found.append(
                (
                    "CPG031",
                    f"the cluster-mesh entity is new in Cilium 1.20: {shown} refuses it",
                    (*rule.path, key, n),
                )
            )
    return found


def _l7_version_findings(rule: Rule, version: Version, shown: str) -> list[Found]:
    """DNS wildcards a release reads otherwise, and Kafka rules."""
    found: list[Found] = []
    for port_rule in rule.port_rules:
        for dns in port_rule.dns:
            found += _wildcard(dns, version, shown)
        if port_rule.has_kafka and version < KAFKA_GONE_SINCE:
            found.append(
                (
                    "CPG030",
                    f"Kafka rules are deprecated in Cilium {shown} and gone in 1.20",
                    port_rule.l7_path("kafka"),
                )
            )
    return found


def _cluster_scope_findings(policy: Mapping[str, Any], version: Version, shown: str) -> list[Found]:
    """Before 1.19, a selector that names no cluster beside one that does selects pods of
    every cluster: each such selector."""
    if version >= LOCAL_CLUSTER_DEFAULT_SINCE:
        return []
    names_cluster = False
    unscoped: list[tuple[str | int, ...]] = []
    for _spec, rule in _rules(policy):
        for selector in rule.endpoints_both_sides:
            if not isinstance(selector.written, Mapping):
                continue
            if _names_cluster(selector):
                names_cluster = True
            elif not _names_reserved(selector):
                unscoped.append(selector.path)
    if not names_cluster:
        return []
    return [
        (
            "CPG033",
            f"no cluster named: in Cilium {shown} (before 1.19) this selector selects its "
            "pods in every cluster of the mesh, not only the local one",
            where,
        )
        for where in unscoped
    ]


def _wildcard(entry: NameMatch, version: Version, shown: str) -> list[Found]:
    pattern = entry.pattern_written
    if (
        isinstance(pattern, str)
        and pattern.startswith("**.")
        and version < MULTI_LABEL_WILDCARD_SINCE
    ):
        return [
            (
                "CPG031",
                f"{pattern}: the multi-level wildcard is new in Cilium 1.19; {shown} reads "
                "** as *, one DNS label",
                entry.pattern_path,
            )
        ]
    return []


def _keys(selector: Selector) -> list[tuple[str, str]]:
    keys = [label_key(str(k)) for k, _ in selector.labels_written]
    keys += [label_key(e.key) for e in selector.expressions]
    return keys


def _names_cluster(selector: Selector) -> bool:
    return any(key == CLUSTER_LABEL for _source, key in _keys(selector))


def _names_reserved(selector: Selector) -> bool:
    return any(source == "reserved" for source, _key in _keys(selector))
