"""Proposed and applied policies on live traffic: the plan judged as flows arrive (``cpg
shadow``, a cpg-mcp shadow session), the drift of applied policies (``cpg drift``), and the
requests that say what to watch."""

from cpg_core._requests.run_request import DriftRequest, ShadowRequest
from cpg_core._review.drift import Drift, DriftJudge, NeedsRule, StaleRule, UnseenPods
from cpg_core._review.plan import PlanJudge
from cpg_core._review.plan_documents import WouldBreak

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
