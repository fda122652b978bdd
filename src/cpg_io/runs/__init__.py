"""The run layer: one function per use case, each taking the typed request both roots build
and returning a typed result (a live one: a session, connected, that the root runs and
closes). The CLI and cpg-mcp are flags or tool arguments → request → run → rendering;
nothing here knows which of them called."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:  # each name as itself: an explicit re-export for type checkers
    from cpg_io.runs._access import RelayAccess as RelayAccess
    from cpg_io.runs._drift import (
        DriftRun as DriftRun,
        DriftSession as DriftSession,
        drift as drift,
    )
    from cpg_io.runs._explain import ExplainRun as ExplainRun, explain as explain
    from cpg_io.runs._lint import lint_run as lint_run
    from cpg_io.runs._live import LiveCapture as LiveCapture, live as live
    from cpg_io.runs._output import RunResult as RunResult, run_report as run_report
    from cpg_io.runs._plan import (
        PlanRun as PlanRun,
        plan_run as plan_run,
        write_fixes as write_fixes,
    )
    from cpg_io.runs._propose import (
        ProposeRequest as ProposeRequest,
        ProposeResult as ProposeResult,
        propose as propose,
    )
    from cpg_io.runs._replay import exit_code as exit_code, replay as replay
    from cpg_io.runs._report import read_review as read_review
    from cpg_io.runs._shadow import (
        ShadowCapture as ShadowCapture,
        shadow as shadow,
        shadow_verdict as shadow_verdict,
    )
    from cpg_io.runs._verify import verify_run as verify_run
    from cpg_io.runs._why import WhyRun as WhyRun, trace_run as trace_run, why_run as why_run

_WHERE = {
    "cpg_io.runs._access": "RelayAccess",
    "cpg_io.runs._drift": "DriftRun DriftSession drift",
    "cpg_io.runs._explain": "ExplainRun explain",
    "cpg_io.runs._lint": "lint_run",
    "cpg_io.runs._live": "LiveCapture live",
    "cpg_io.runs._output": "RunResult run_report",
    "cpg_io.runs._plan": "PlanRun plan_run write_fixes",
    "cpg_io.runs._propose": "ProposeRequest ProposeResult propose",
    "cpg_io.runs._replay": "exit_code replay",
    "cpg_io.runs._report": "read_review",
    "cpg_io.runs._shadow": "ShadowCapture shadow shadow_verdict",
    "cpg_io.runs._verify": "verify_run",
    "cpg_io.runs._why": "WhyRun trace_run why_run",
}
__getattr__, __all__ = lazy_face(__name__, _WHERE)
