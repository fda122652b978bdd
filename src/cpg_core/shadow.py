"""Proposed policies on live traffic (``cpg shadow``, a cpg-mcp shadow session): the plan
judged as flows arrive, and the request that says what to watch."""

from cpg_core._plan import PlanJudge, WouldBreak
from cpg_core._run_request import ShadowRequest

__all__ = ["PlanJudge", "ShadowRequest", "WouldBreak"]
