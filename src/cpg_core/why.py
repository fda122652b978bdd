"""Why a flow was denied and what would admit it (``cpg why``, ``cpg trace``, cpg-mcp's
``explain_flow`` and ``trace_flow``): the answer, the Hubble-style filters that pick the flows
of a capture, and flows described by hand."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core._filters import VERDICTS, FlowFilter
    from cpg_core._synthesis import note_pod, with_known_pod
    from cpg_core._verify import check_key
    from cpg_core._why import (
        RuleMiss,
        Why,
        explain_denial,
        merged_answers,
        traced_endpoint,
        traced_flows,
        why_names,
    )

_WHERE = {
    "FlowFilter": "cpg_core._filters",
    "RuleMiss": "cpg_core._why",
    "VERDICTS": "cpg_core._filters",
    "Why": "cpg_core._why",
    "check_key": "cpg_core._verify",
    "explain_denial": "cpg_core._why",
    "merged_answers": "cpg_core._why",
    "note_pod": "cpg_core._synthesis",
    "traced_endpoint": "cpg_core._why",
    "traced_flows": "cpg_core._why",
    "why_names": "cpg_core._why",
    "with_known_pod": "cpg_core._synthesis",
}
__getattr__ = lazy_face(__name__, _WHERE)

__all__ = [
    "VERDICTS",
    "FlowFilter",
    "RuleMiss",
    "Why",
    "check_key",
    "explain_denial",
    "merged_answers",
    "note_pod",
    "traced_endpoint",
    "traced_flows",
    "why_names",
    "with_known_pod",
]
