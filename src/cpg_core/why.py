"""Why a flow was denied and what would admit it (``cpg why``, ``cpg trace``, cpg-mcp's
``explain_flow`` and ``trace_flow``): the answer, the Hubble-style filters that pick the flows
of a capture, and flows described by hand."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:  # each name as itself: an explicit re-export for type checkers
    from cpg_core._flows.filters import VERDICTS as VERDICTS, FlowFilter as FlowFilter
    from cpg_core._flows.synthesis import note_pod as note_pod, with_known_pod as with_known_pod
    from cpg_core._review.behind import evidence_behind as evidence_behind
    from cpg_core._review.verify import check_key as check_key
    from cpg_core._review.why import (
        RuleMiss as RuleMiss,
        Why as Why,
        explain_denial as explain_denial,
        merged_answers as merged_answers,
        traced_endpoint as traced_endpoint,
        traced_flows as traced_flows,
        why_names as why_names,
    )

_WHERE = {
    "cpg_core._flows.filters": "VERDICTS FlowFilter",
    "cpg_core._flows.synthesis": "note_pod with_known_pod",
    "cpg_core._review.behind": "evidence_behind",
    "cpg_core._review.verify": "check_key",
    "cpg_core._review.why": (
        "RuleMiss Why explain_denial merged_answers traced_endpoint traced_flows why_names"
    ),
}
__getattr__, __all__ = lazy_face(__name__, _WHERE)
