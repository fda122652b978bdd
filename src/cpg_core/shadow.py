"""Proposed and applied policies on live traffic: the plan judged as flows arrive (``cpg
shadow``, a cpg-mcp shadow session), the drift of applied policies (``cpg drift``), and the
requests that say what to watch."""

from cpg_core.requests import DriftRequest, ShadowRequest
from cpg_core.review import (
    Drift,
    DriftJudge,
    NeedsRule,
    PlanJudge,
    StaleRule,
    UnseenPods,
    WouldBreak,
)

__all__ = [
    "Drift",
    "DriftJudge",
    "DriftRequest",
    "NeedsRule",
    "PlanJudge",
    "ShadowRequest",
    "StaleRule",
    "UnseenPods",
    "WouldBreak",
]
