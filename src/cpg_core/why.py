"""Why a flow was denied and what would admit it (``cpg why``, ``cpg trace``, cpg-mcp's
``explain_flow`` and ``trace_flow``): the answer, the Hubble-style filters that pick the flows
of a capture, and flows described by hand."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core.flows import VERDICTS, FlowFilter, note_pod, with_known_pod
    from cpg_core.review import (
        RuleMiss,
        Why,
        check_key,
        evidence_behind,
        explain_denial,
        merged_answers,
        traced_endpoint,
        traced_flows,
        why_names,
    )

_WHERE = {
    "FlowFilter": "cpg_core.flows",
    "RuleMiss": "cpg_core.review",
    "VERDICTS": "cpg_core.flows",
    "Why": "cpg_core.review",
    "check_key": "cpg_core.review",
    "evidence_behind": "cpg_core.review",
    "explain_denial": "cpg_core.review",
    "merged_answers": "cpg_core.review",
    "note_pod": "cpg_core.flows",
    "traced_endpoint": "cpg_core.review",
    "traced_flows": "cpg_core.review",
    "why_names": "cpg_core.review",
    "with_known_pod": "cpg_core.flows",
}
__getattr__ = lazy_face(__name__, _WHERE)

__all__ = [
    "VERDICTS",
    "FlowFilter",
    "RuleMiss",
    "Why",
    "check_key",
    "evidence_behind",
    "explain_denial",
    "merged_answers",
    "note_pod",
    "traced_endpoint",
    "traced_flows",
    "why_names",
    "with_known_pod",
]
