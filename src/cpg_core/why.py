"""Why a flow was denied and what would admit it (``cpg why``, ``cpg trace``, cpg-mcp's
``explain_flow`` and ``trace_flow``): the answer, the Hubble-style filters that pick the flows
of a capture, and flows described by hand."""

from cpg_core._filters import VERDICTS, FlowFilter
from cpg_core._synthesis import note_pod, with_known_pod
from cpg_core._verify import check_key
from cpg_core._why import (
    RuleMiss,
    Why,
    explain_denial,
    traced_endpoint,
    traced_flows,
    why_names,
)

__all__ = [
    "VERDICTS",
    "FlowFilter",
    "RuleMiss",
    "Why",
    "check_key",
    "explain_denial",
    "note_pod",
    "traced_endpoint",
    "traced_flows",
    "why_names",
    "with_known_pod",
]
