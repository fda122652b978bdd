"""The run layer: one function per use case, each taking the typed request both roots build
and returning a typed result (a live one: a session, connected, that the root runs and
closes). The CLI and cpg-mcp are flags or tool arguments → request → run → rendering;
nothing here knows which of them called."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_io.runs._access import RelayAccess
    from cpg_io.runs._drift import DriftRun, DriftSession, drift
    from cpg_io.runs._explain import ExplainRun, explain
    from cpg_io.runs._lint import lint_run
    from cpg_io.runs._live import LiveCapture, live
    from cpg_io.runs._output import RunResult, run_report
    from cpg_io.runs._plan import PlanRun, plan_run, write_fixes
    from cpg_io.runs._propose import ProposeRequest, ProposeResult, propose
    from cpg_io.runs._replay import exit_code, replay
    from cpg_io.runs._report import read_review
    from cpg_io.runs._shadow import ShadowCapture, shadow, shadow_verdict
    from cpg_io.runs._verify import verify_run
    from cpg_io.runs._why import WhyRun, trace_run, why_run

_WHERE = {
    "DriftRun": "cpg_io.runs._drift",
    "DriftSession": "cpg_io.runs._drift",
    "ExplainRun": "cpg_io.runs._explain",
    "LiveCapture": "cpg_io.runs._live",
    "PlanRun": "cpg_io.runs._plan",
    "ProposeRequest": "cpg_io.runs._propose",
    "ProposeResult": "cpg_io.runs._propose",
    "RelayAccess": "cpg_io.runs._access",
    "RunResult": "cpg_io.runs._output",
    "ShadowCapture": "cpg_io.runs._shadow",
    "WhyRun": "cpg_io.runs._why",
    "drift": "cpg_io.runs._drift",
    "exit_code": "cpg_io.runs._replay",
    "explain": "cpg_io.runs._explain",
    "lint_run": "cpg_io.runs._lint",
    "live": "cpg_io.runs._live",
    "plan_run": "cpg_io.runs._plan",
    "propose": "cpg_io.runs._propose",
    "read_review": "cpg_io.runs._report",
    "replay": "cpg_io.runs._replay",
    "run_report": "cpg_io.runs._output",
    "shadow": "cpg_io.runs._shadow",
    "shadow_verdict": "cpg_io.runs._shadow",
    "trace_run": "cpg_io.runs._why",
    "verify_run": "cpg_io.runs._verify",
    "why_run": "cpg_io.runs._why",
    "write_fixes": "cpg_io.runs._plan",
}
__getattr__ = lazy_face(__name__, _WHERE)

__all__ = [
    "DriftRun",
    "DriftSession",
    "ExplainRun",
    "LiveCapture",
    "PlanRun",
    "ProposeRequest",
    "ProposeResult",
    "RelayAccess",
    "RunResult",
    "ShadowCapture",
    "WhyRun",
    "drift",
    "exit_code",
    "explain",
    "lint_run",
    "live",
    "plan_run",
    "propose",
    "read_review",
    "replay",
    "run_report",
    "shadow",
    "shadow_verdict",
    "trace_run",
    "verify_run",
    "why_run",
    "write_fixes",
]
