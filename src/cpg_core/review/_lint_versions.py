"""``cpg lint --cilium-version``: what a document means to one Cilium release. Deprecated
fields, features that release lacks, defaults it changed, and annotations that do nothing
(ARCHITECTURE §D39). Pure: a policy in, (code, message, path) out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpg_core.base._cilium_version import LOCAL_CLUSTER_DEFAULT_SINCE, Version, format_version
from cpg_core.base._labels import CLUSTER_LABEL
from cpg_core.policy._acceptance import Found, spec_rules
from cpg_core.policy._matcher import label_key

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
    for path, section, rule in spec_rules(policy):
        found += _peer_version_findings(rule, version, shown, path)
        if section == "egress":
            for n, fqdn in enumerate(rule.get("toFQDNs") or []):
                found += _wildcard(fqdn, version, shown, (*path, "toFQDNs", n))
        found += _l7_version_findings(rule, version, shown, path)
    return found + _cluster_scope_findings(policy, version, shown)


def _peer_version_findings(
    rule: Mapping[str, Any], version: Version, shown: str, path: tuple[str | int, ...]
) -> list[Found]:
    """Deprecated requirement peers and entities a release does not have."""
    found: list[Found] = []
    for key in ("fromRequires", "toRequires"):
        if rule.get(key) and version >= DEPRECATED_REQUIRES_SINCE:
            found.append(
                (
                    "CPG030",
                    f"{key} is deprecated in Cilium {shown} and being removed: select the "
                    "peers with fromEndpoints/toEndpoints instead",
                    (*path, key),
                )
            )
    for key in ("fromEntities", "toEntities"):
        for n, entity in enumerate(rule.get(key) or []):
            if entity == "cluster-mesh" and version < CLUSTER_MESH_ENTITY_SINCE:
                found.append(
                    (
                        "CPG031",
                        f"the cluster-mesh entity is new in Cilium 1.20: {shown} refuses it",
                        (*path, key, n),
                    )
                )
    return found


def _l7_version_findings(
    rule: Mapping[str, Any], version: Version, shown: str, path: tuple[str | int, ...]
) -> list[Found]:
    """DNS wildcards a release reads otherwise, and Kafka rules."""
    found: list[Found] = []
    for n, port_rule in enumerate(rule.get("toPorts") or []):
        rules = port_rule.get("rules") if isinstance(port_rule, Mapping) else None
        if not isinstance(rules, Mapping):
            continue
        for m, dns in enumerate(rules.get("dns") or []):
            found += _wildcard(dns, version, shown, (*path, "toPorts", n, "rules", "dns", m))
        if rules.get("kafka") and version < KAFKA_GONE_SINCE:
            found.append(
                (
                    "CPG030",
                    f"Kafka rules are deprecated in Cilium {shown} and gone in 1.20",
                    (*path, "toPorts", n, "rules", "kafka"),
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
    for path, _section, rule in spec_rules(policy):
        for key in ("fromEndpoints", "toEndpoints"):
            for n, selector in enumerate(rule.get(key) or []):
                if not isinstance(selector, Mapping):
                    continue
                if _names_cluster(selector):
                    names_cluster = True
                elif not _names_reserved(selector):
                    unscoped.append((*path, key, n))
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


def _wildcard(
    entry: Any, version: Version, shown: str, where: tuple[str | int, ...]
) -> list[Found]:
    pattern = entry.get("matchPattern") if isinstance(entry, Mapping) else None
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
                (*where, "matchPattern"),
            )
        ]
    return []


def _keys(selector: Mapping[str, Any]) -> list[tuple[str, str]]:
    keys = [label_key(str(k)) for k in selector.get("matchLabels") or {}]
    keys += [
        label_key(str(e.get("key", "")))
        for e in selector.get("matchExpressions") or []
        if isinstance(e, Mapping)
    ]
    return keys


def _names_cluster(selector: Mapping[str, Any]) -> bool:
    return any(key == CLUSTER_LABEL for _source, key in _keys(selector))


def _names_reserved(selector: Mapping[str, Any]) -> bool:
    return any(source == "reserved" for source, _key in _keys(selector))
