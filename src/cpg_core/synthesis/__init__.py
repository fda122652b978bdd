"""Writing policies: aggregation of allow entries, cluster scope, sharing, baselines, rendering and merging into files, narrowing and fixes.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and nothing private crosses into another layer: what the other folders take from
it, they take from this package (the table below, loaded on first use), never from its
private modules."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core.synthesis._aggregate import (
        AggregateOptions,
        Aggregator,
        HeldBack,
        PolicyPlan,
    )
    from cpg_core.synthesis._baseline import (
        KIND,
        BaselinePolicy,
        member_view,
        move_to_baseline,
        read_baseline,
        render_baseline,
        with_baseline_rules,
    )
    from cpg_core.synthesis._fixes import (
        discriminator,
        exclusion,
        narrowed_yaml,
        narrowing_yaml,
        rule_yaml,
        unknown_pod_peer,
    )
    from cpg_core.synthesis._lines import (
        MAX_LINE_BYTES,
        MAX_REPORTED,
        OVERSIZED,
        LineAggregator,
        Readers,
        ReadStats,
        merge_stats,
        parse_lines,
    )
    from cpg_core.synthesis._merge import (
        ForeignPolicy,
        foreign_policy,
    )
    from cpg_core.synthesis._narrow import (
        Exclusions,
        narrow_in_text,
        split_exclusions,
        with_exclusions,
    )
    from cpg_core.synthesis._render import (
        MANAGED_BY_LABEL,
        MANAGED_BY_VALUE,
        is_shared,
        render_policy,
    )
    from cpg_core.synthesis._scope import (
        CLUSTER_WHY,
        DEFAULT_SERVICE_NAMESPACES,
        FOR_CLUSTER,
        SYSTEM_NAMESPACES,
        ClusterScope,
        ScopeReport,
    )
    from cpg_core.synthesis._sharing import (
        SharedPolicy,
        Sharing,
        evidence_by_policy,
        read_shared,
        render_shared,
        share_rules,
        shared_evidence_plan,
    )

_WHERE = {
    "AggregateOptions": "cpg_core.synthesis._aggregate",
    "Aggregator": "cpg_core.synthesis._aggregate",
    "BaselinePolicy": "cpg_core.synthesis._baseline",
    "CLUSTER_WHY": "cpg_core.synthesis._scope",
    "ClusterScope": "cpg_core.synthesis._scope",
    "DEFAULT_SERVICE_NAMESPACES": "cpg_core.synthesis._scope",
    "Exclusions": "cpg_core.synthesis._narrow",
    "FOR_CLUSTER": "cpg_core.synthesis._scope",
    "ForeignPolicy": "cpg_core.synthesis._merge",
    "HeldBack": "cpg_core.synthesis._aggregate",
    "KIND": "cpg_core.synthesis._baseline",
    "LineAggregator": "cpg_core.synthesis._lines",
    "MANAGED_BY_LABEL": "cpg_core.synthesis._render",
    "MANAGED_BY_VALUE": "cpg_core.synthesis._render",
    "MAX_LINE_BYTES": "cpg_core.synthesis._lines",
    "MAX_REPORTED": "cpg_core.synthesis._lines",
    "OVERSIZED": "cpg_core.synthesis._lines",
    "PolicyPlan": "cpg_core.synthesis._aggregate",
    "ReadStats": "cpg_core.synthesis._lines",
    "Readers": "cpg_core.synthesis._lines",
    "SYSTEM_NAMESPACES": "cpg_core.synthesis._scope",
    "ScopeReport": "cpg_core.synthesis._scope",
    "SharedPolicy": "cpg_core.synthesis._sharing",
    "Sharing": "cpg_core.synthesis._sharing",
    "discriminator": "cpg_core.synthesis._fixes",
    "evidence_by_policy": "cpg_core.synthesis._sharing",
    "exclusion": "cpg_core.synthesis._fixes",
    "foreign_policy": "cpg_core.synthesis._merge",
    "is_shared": "cpg_core.synthesis._render",
    "member_view": "cpg_core.synthesis._baseline",
    "merge_stats": "cpg_core.synthesis._lines",
    "move_to_baseline": "cpg_core.synthesis._baseline",
    "narrow_in_text": "cpg_core.synthesis._narrow",
    "narrowed_yaml": "cpg_core.synthesis._fixes",
    "narrowing_yaml": "cpg_core.synthesis._fixes",
    "parse_lines": "cpg_core.synthesis._lines",
    "read_baseline": "cpg_core.synthesis._baseline",
    "read_shared": "cpg_core.synthesis._sharing",
    "render_baseline": "cpg_core.synthesis._baseline",
    "render_policy": "cpg_core.synthesis._render",
    "render_shared": "cpg_core.synthesis._sharing",
    "rule_yaml": "cpg_core.synthesis._fixes",
    "share_rules": "cpg_core.synthesis._sharing",
    "shared_evidence_plan": "cpg_core.synthesis._sharing",
    "split_exclusions": "cpg_core.synthesis._narrow",
    "unknown_pod_peer": "cpg_core.synthesis._fixes",
    "with_baseline_rules": "cpg_core.synthesis._baseline",
    "with_exclusions": "cpg_core.synthesis._narrow",
}
"""Each name other folders take from this layer, and the module that has it."""

__getattr__ = lazy_face(__name__, _WHERE)
__all__ = [
    "CLUSTER_WHY",
    "DEFAULT_SERVICE_NAMESPACES",
    "FOR_CLUSTER",
    "KIND",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "MAX_LINE_BYTES",
    "MAX_REPORTED",
    "OVERSIZED",
    "SYSTEM_NAMESPACES",
    "AggregateOptions",
    "Aggregator",
    "BaselinePolicy",
    "ClusterScope",
    "Exclusions",
    "ForeignPolicy",
    "HeldBack",
    "LineAggregator",
    "PolicyPlan",
    "ReadStats",
    "Readers",
    "ScopeReport",
    "SharedPolicy",
    "Sharing",
    "discriminator",
    "evidence_by_policy",
    "exclusion",
    "foreign_policy",
    "is_shared",
    "member_view",
    "merge_stats",
    "move_to_baseline",
    "narrow_in_text",
    "narrowed_yaml",
    "narrowing_yaml",
    "parse_lines",
    "read_baseline",
    "read_shared",
    "render_baseline",
    "render_policy",
    "render_shared",
    "rule_yaml",
    "share_rules",
    "shared_evidence_plan",
    "split_exclusions",
    "unknown_pod_peer",
    "with_baseline_rules",
    "with_exclusions",
]
