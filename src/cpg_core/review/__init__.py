"""Judging policies against traffic: plan, why, verify, drift, policy map pressure, availability, lint, and the records they keep.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and nothing private crosses into another layer: what the other folders take from
it, they take from this package (the table below, loaded on first use), never from its
private modules."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core.review._availability import (
        BASELINE_GAPS,
        BASELINE_NOTE,
        Availability,
        declared_denials,
        dependency_ends,
    )
    from cpg_core.review._behind import (
        EvidenceReader,
        evidence_behind,
        seen_at,
    )
    from cpg_core.review._drift import (
        Drift,
        DriftJudge,
        NeedsRule,
        StaleRule,
        UnseenPods,
    )
    from cpg_core.review._evidence import (
        plan_evidence,
        rule_records,
    )
    from cpg_core.review._explain import (
        ExplainFilter,
        explain_lines,
        explain_record,
        render_explain_json,
        rule_in_words,
    )
    from cpg_core.review._lint import (
        RULES,
        LintFinding,
        LintRule,
        SchemaCheck,
        SchemaProblem,
        invalid_in_cluster,
        lint_text,
        lint_texts,
        lint_together,
        policy_namespaces,
        selects,
        unreadable_file,
    )
    from cpg_core.review._lint_versions import (
        NEWEST,
        SUPPORTED,
        parse_version,
        supported_text,
    )
    from cpg_core.review._owners import (
        AlsoSelected,
        also_selected,
    )
    from cpg_core.review._plan import (
        CANNOT_JUDGE,
        Plan,
        PlanJudge,
        WouldBreak,
    )
    from cpg_core.review._pressure import (
        EndpointPressure,
    )
    from cpg_core.review._readiness import (
        DEFAULT_MIN_FLOWS,
        DEFAULT_MIN_SPAN,
        DEFAULT_STABLE_FOR,
        ReadinessRules,
        WorkloadProfile,
        not_ready_first,
        readiness_summary,
        workload_profile,
    )
    from cpg_core.review._verify import (
        check_key,
    )
    from cpg_core.review._why import (
        RuleMiss,
        Why,
        explain_denial,
        merged_answers,
        traced_endpoint,
        traced_flows,
        why_names,
    )
    from cpg_core.review._wire import (
        converter,
        to_data,
        to_json,
    )

_WHERE = {
    "BASELINE_GAPS": "cpg_core.review._availability",
    "BASELINE_NOTE": "cpg_core.review._availability",
    "CANNOT_JUDGE": "cpg_core.review._plan",
    "Drift": "cpg_core.review._drift",
    "DriftJudge": "cpg_core.review._drift",
    "EndpointPressure": "cpg_core.review._pressure",
    "EvidenceReader": "cpg_core.review._behind",
    "ExplainFilter": "cpg_core.review._explain",
    "LintFinding": "cpg_core.review._lint",
    "LintRule": "cpg_core.review._lint",
    "NEWEST": "cpg_core.review._lint_versions",
    "NeedsRule": "cpg_core.review._drift",
    "Plan": "cpg_core.review._plan",
    "PlanJudge": "cpg_core.review._plan",
    "RULES": "cpg_core.review._lint",
    "RuleMiss": "cpg_core.review._why",
    "SUPPORTED": "cpg_core.review._lint_versions",
    "SchemaCheck": "cpg_core.review._lint",
    "SchemaProblem": "cpg_core.review._lint",
    "StaleRule": "cpg_core.review._drift",
    "UnseenPods": "cpg_core.review._drift",
    "Why": "cpg_core.review._why",
    "WouldBreak": "cpg_core.review._plan",
    "also_selected": "cpg_core.review._owners",
    "check_key": "cpg_core.review._verify",
    "converter": "cpg_core.review._wire",
    "evidence_behind": "cpg_core.review._behind",
    "explain_denial": "cpg_core.review._why",
    "explain_lines": "cpg_core.review._explain",
    "explain_record": "cpg_core.review._explain",
    "invalid_in_cluster": "cpg_core.review._lint",
    "lint_text": "cpg_core.review._lint",
    "lint_texts": "cpg_core.review._lint",
    "lint_together": "cpg_core.review._lint",
    "merged_answers": "cpg_core.review._why",
    "parse_version": "cpg_core.review._lint_versions",
    "plan_evidence": "cpg_core.review._evidence",
    "policy_namespaces": "cpg_core.review._lint",
    "render_explain_json": "cpg_core.review._explain",
    "rule_in_words": "cpg_core.review._explain",
    "seen_at": "cpg_core.review._behind",
    "selects": "cpg_core.review._lint",
    "supported_text": "cpg_core.review._lint_versions",
    "to_data": "cpg_core.review._wire",
    "to_json": "cpg_core.review._wire",
    "traced_endpoint": "cpg_core.review._why",
    "traced_flows": "cpg_core.review._why",
    "unreadable_file": "cpg_core.review._lint",
    "why_names": "cpg_core.review._why",
    "declared_denials": "cpg_core.review._availability",
    "dependency_ends": "cpg_core.review._availability",
    "Availability": "cpg_core.review._availability",
    "ReadinessRules": "cpg_core.review._readiness",
    "WorkloadProfile": "cpg_core.review._readiness",
    "workload_profile": "cpg_core.review._readiness",
    "not_ready_first": "cpg_core.review._readiness",
    "readiness_summary": "cpg_core.review._readiness",
    "DEFAULT_MIN_SPAN": "cpg_core.review._readiness",
    "DEFAULT_STABLE_FOR": "cpg_core.review._readiness",
    "DEFAULT_MIN_FLOWS": "cpg_core.review._readiness",
    "rule_records": "cpg_core.review._evidence",
    "AlsoSelected": "cpg_core.review._owners",
}
"""Each name other folders take from this layer, and the module that has it."""

__getattr__ = lazy_face(__name__, _WHERE)
__all__ = [
    "BASELINE_GAPS",
    "BASELINE_NOTE",
    "CANNOT_JUDGE",
    "DEFAULT_MIN_FLOWS",
    "DEFAULT_MIN_SPAN",
    "DEFAULT_STABLE_FOR",
    "NEWEST",
    "RULES",
    "SUPPORTED",
    "AlsoSelected",
    "Availability",
    "Drift",
    "DriftJudge",
    "EndpointPressure",
    "EvidenceReader",
    "ExplainFilter",
    "LintFinding",
    "LintRule",
    "NeedsRule",
    "Plan",
    "PlanJudge",
    "ReadinessRules",
    "RuleMiss",
    "SchemaCheck",
    "SchemaProblem",
    "StaleRule",
    "UnseenPods",
    "Why",
    "WorkloadProfile",
    "WouldBreak",
    "also_selected",
    "check_key",
    "converter",
    "declared_denials",
    "dependency_ends",
    "evidence_behind",
    "explain_denial",
    "explain_lines",
    "explain_record",
    "invalid_in_cluster",
    "lint_text",
    "lint_texts",
    "lint_together",
    "merged_answers",
    "not_ready_first",
    "parse_version",
    "plan_evidence",
    "policy_namespaces",
    "readiness_summary",
    "render_explain_json",
    "rule_in_words",
    "rule_records",
    "seen_at",
    "selects",
    "supported_text",
    "to_data",
    "to_json",
    "traced_endpoint",
    "traced_flows",
    "unreadable_file",
    "why_names",
    "workload_profile",
]
