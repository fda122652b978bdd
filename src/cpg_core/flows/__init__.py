"""Reading flows: the JSON parser and the quick reader, decisions and triage, the Hubble-style filters, identities where Hubble leaves them out, and how a flow becomes an allow entry.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and nothing private crosses into another layer: what the other folders take from
it, they take from this package (the table below, loaded on first use), never from its
private modules."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core.flows._attribution import (
        NO_TIME,
        RuleStats,
        flow_class,
        sample_record,
        time_key,
    )
    from cpg_core.flows._decide import (
        DECISION_LABELS,
        FINDING_DECISIONS,
        DecideOptions,
        Decision,
        candidate_by_key,
        decide,
        looks_like_reply,
        not_a_drop_by_verdict,
    )
    from cpg_core.flows._filters import (
        VERDICTS,
        FlowFilter,
    )
    from cpg_core.flows._identities import (
        IDENTITY,
        KINDS,
        OWNER,
        UNTRUSTED,
        WORLD_POD,
        IdentityBook,
        IdentityInputError,
        KnownPod,
        identity_book,
        joined_books,
    )
    from cpg_core.flows._numbers import (
        EndpointNumbers,
        QuickKey,
    )
    from cpg_core.flows._parse import (
        FlowParser,
    )
    from cpg_core.flows._quickline import (
        QuickReader,
        quick_decision,
    )
    from cpg_core.flows._sniff import (
        CAPTURE_HINT,
        describe_unreadable,
    )
    from cpg_core.flows._synthesis import (
        PolicyTarget,
        Resolved,
        Resolver,
        Unhandled,
        Unresolved,
        cluster_of,
        endpoint_kind,
        endpoint_name,
        endpoint_order,
        is_pod_endpoint,
        mesh_flow,
        mesh_peer,
        note_pod,
        with_known_pod,
    )
    from cpg_core.flows._triage import (
        DropTally,
        FindingTally,
        HealthSession,
        capped_breakdowns,
        deny_finding_key,
        health_document,
        severity_order,
        top_entries,
    )

_WHERE = {
    "CAPTURE_HINT": "cpg_core.flows._sniff",
    "DECISION_LABELS": "cpg_core.flows._decide",
    "DecideOptions": "cpg_core.flows._decide",
    "Decision": "cpg_core.flows._decide",
    "DropTally": "cpg_core.flows._triage",
    "EndpointNumbers": "cpg_core.flows._numbers",
    "FINDING_DECISIONS": "cpg_core.flows._decide",
    "FindingTally": "cpg_core.flows._triage",
    "FlowFilter": "cpg_core.flows._filters",
    "FlowParser": "cpg_core.flows._parse",
    "HealthSession": "cpg_core.flows._triage",
    "IDENTITY": "cpg_core.flows._identities",
    "IdentityBook": "cpg_core.flows._identities",
    "IdentityInputError": "cpg_core.flows._identities",
    "KINDS": "cpg_core.flows._identities",
    "KnownPod": "cpg_core.flows._identities",
    "NO_TIME": "cpg_core.flows._attribution",
    "OWNER": "cpg_core.flows._identities",
    "PolicyTarget": "cpg_core.flows._synthesis",
    "QuickKey": "cpg_core.flows._numbers",
    "QuickReader": "cpg_core.flows._quickline",
    "Resolved": "cpg_core.flows._synthesis",
    "Resolver": "cpg_core.flows._synthesis",
    "RuleStats": "cpg_core.flows._attribution",
    "UNTRUSTED": "cpg_core.flows._identities",
    "Unhandled": "cpg_core.flows._synthesis",
    "Unresolved": "cpg_core.flows._synthesis",
    "VERDICTS": "cpg_core.flows._filters",
    "WORLD_POD": "cpg_core.flows._identities",
    "candidate_by_key": "cpg_core.flows._decide",
    "capped_breakdowns": "cpg_core.flows._triage",
    "cluster_of": "cpg_core.flows._synthesis",
    "decide": "cpg_core.flows._decide",
    "deny_finding_key": "cpg_core.flows._triage",
    "describe_unreadable": "cpg_core.flows._sniff",
    "endpoint_kind": "cpg_core.flows._synthesis",
    "endpoint_name": "cpg_core.flows._synthesis",
    "endpoint_order": "cpg_core.flows._synthesis",
    "flow_class": "cpg_core.flows._attribution",
    "health_document": "cpg_core.flows._triage",
    "identity_book": "cpg_core.flows._identities",
    "is_pod_endpoint": "cpg_core.flows._synthesis",
    "joined_books": "cpg_core.flows._identities",
    "looks_like_reply": "cpg_core.flows._decide",
    "mesh_flow": "cpg_core.flows._synthesis",
    "mesh_peer": "cpg_core.flows._synthesis",
    "not_a_drop_by_verdict": "cpg_core.flows._decide",
    "note_pod": "cpg_core.flows._synthesis",
    "quick_decision": "cpg_core.flows._quickline",
    "sample_record": "cpg_core.flows._attribution",
    "severity_order": "cpg_core.flows._triage",
    "time_key": "cpg_core.flows._attribution",
    "top_entries": "cpg_core.flows._triage",
    "with_known_pod": "cpg_core.flows._synthesis",
}
"""Each name other folders take from this layer, and the module that has it."""

__getattr__ = lazy_face(__name__, _WHERE)
__all__ = [
    "CAPTURE_HINT",
    "DECISION_LABELS",
    "FINDING_DECISIONS",
    "IDENTITY",
    "KINDS",
    "NO_TIME",
    "OWNER",
    "UNTRUSTED",
    "VERDICTS",
    "WORLD_POD",
    "DecideOptions",
    "Decision",
    "DropTally",
    "EndpointNumbers",
    "FindingTally",
    "FlowFilter",
    "FlowParser",
    "HealthSession",
    "IdentityBook",
    "IdentityInputError",
    "KnownPod",
    "PolicyTarget",
    "QuickKey",
    "QuickReader",
    "Resolved",
    "Resolver",
    "RuleStats",
    "Unhandled",
    "Unresolved",
    "candidate_by_key",
    "capped_breakdowns",
    "cluster_of",
    "decide",
    "deny_finding_key",
    "describe_unreadable",
    "endpoint_kind",
    "endpoint_name",
    "endpoint_order",
    "flow_class",
    "health_document",
    "identity_book",
    "is_pod_endpoint",
    "joined_books",
    "looks_like_reply",
    "mesh_flow",
    "mesh_peer",
    "not_a_drop_by_verdict",
    "note_pod",
    "quick_decision",
    "sample_record",
    "severity_order",
    "time_key",
    "top_entries",
    "with_known_pod",
]
