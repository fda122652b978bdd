"""The run layer: one function per use case, each taking the typed request both roots build
and returning a typed result. The CLI and cpg-mcp are flags or tool arguments → request →
run → rendering; nothing here knows which of them called."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_io.runs._drift import DriftCapture, DriftRun, drift_capture, drift_run
    from cpg_io.runs._lint import LintInputError, LintRun, lint_run
    from cpg_io.runs._live import LiveCapture, LiveSettings, connect_relay, live_settings
    from cpg_io.runs._output import EvidenceSettings, FileResult, RunResult, run_report, write_plan
    from cpg_io.runs._plan import (
        PlannedCapture,
        PlanRun,
        WrittenFixes,
        plan_capture,
        plan_run,
        write_fixes,
    )
    from cpg_io.runs._propose import (
        GITHUB_API,
        ProposeError,
        ProposeRequest,
        ProposeResult,
        propose,
    )
    from cpg_io.runs._replay import (
        evidence_settings,
        exit_code,
        replay,
        replay_capture,
        run_failed,
    )
    from cpg_io.runs._report import read_review
    from cpg_io.runs._session import rfc3339, utc_now
    from cpg_io.runs._shadow import (
        ShadowCapture,
        ShadowSettings,
        ShadowSetup,
        shadow_setup,
        shadow_verdict,
    )
    from cpg_io.runs._verify import VerifiedCapture, VerifyRun, verify_capture, verify_run
    from cpg_io.runs._why import WhyRun, trace_run, why_run

_WHERE = {
    "DriftCapture": "cpg_io.runs._drift",
    "DriftRun": "cpg_io.runs._drift",
    "EvidenceSettings": "cpg_io.runs._output",
    "FileResult": "cpg_io.runs._output",
    "GITHUB_API": "cpg_io.runs._propose",
    "LintInputError": "cpg_io.runs._lint",
    "LintRun": "cpg_io.runs._lint",
    "LiveCapture": "cpg_io.runs._live",
    "LiveSettings": "cpg_io.runs._live",
    "PlanRun": "cpg_io.runs._plan",
    "PlannedCapture": "cpg_io.runs._plan",
    "ProposeError": "cpg_io.runs._propose",
    "ProposeRequest": "cpg_io.runs._propose",
    "ProposeResult": "cpg_io.runs._propose",
    "RunResult": "cpg_io.runs._output",
    "ShadowCapture": "cpg_io.runs._shadow",
    "ShadowSettings": "cpg_io.runs._shadow",
    "ShadowSetup": "cpg_io.runs._shadow",
    "VerifiedCapture": "cpg_io.runs._verify",
    "VerifyRun": "cpg_io.runs._verify",
    "WhyRun": "cpg_io.runs._why",
    "WrittenFixes": "cpg_io.runs._plan",
    "connect_relay": "cpg_io.runs._live",
    "drift_capture": "cpg_io.runs._drift",
    "drift_run": "cpg_io.runs._drift",
    "evidence_settings": "cpg_io.runs._replay",
    "exit_code": "cpg_io.runs._replay",
    "lint_run": "cpg_io.runs._lint",
    "live_settings": "cpg_io.runs._live",
    "plan_capture": "cpg_io.runs._plan",
    "plan_run": "cpg_io.runs._plan",
    "propose": "cpg_io.runs._propose",
    "read_review": "cpg_io.runs._report",
    "replay": "cpg_io.runs._replay",
    "replay_capture": "cpg_io.runs._replay",
    "rfc3339": "cpg_io.runs._session",
    "run_failed": "cpg_io.runs._replay",
    "run_report": "cpg_io.runs._output",
    "shadow_setup": "cpg_io.runs._shadow",
    "shadow_verdict": "cpg_io.runs._shadow",
    "trace_run": "cpg_io.runs._why",
    "utc_now": "cpg_io.runs._session",
    "verify_capture": "cpg_io.runs._verify",
    "verify_run": "cpg_io.runs._verify",
    "why_run": "cpg_io.runs._why",
    "write_fixes": "cpg_io.runs._plan",
    "write_plan": "cpg_io.runs._output",
}
__getattr__ = lazy_face(__name__, _WHERE)

__all__ = [
    "GITHUB_API",
    "DriftCapture",
    "DriftRun",
    "EvidenceSettings",
    "FileResult",
    "LintInputError",
    "LintRun",
    "LiveCapture",
    "LiveSettings",
    "PlanRun",
    "PlannedCapture",
    "ProposeError",
    "ProposeRequest",
    "ProposeResult",
    "RunResult",
    "ShadowCapture",
    "ShadowSettings",
    "ShadowSetup",
    "VerifiedCapture",
    "VerifyRun",
    "WhyRun",
    "WrittenFixes",
    "connect_relay",
    "drift_capture",
    "drift_run",
    "evidence_settings",
    "exit_code",
    "lint_run",
    "live_settings",
    "plan_capture",
    "plan_run",
    "propose",
    "read_review",
    "replay",
    "replay_capture",
    "rfc3339",
    "run_failed",
    "run_report",
    "shadow_setup",
    "shadow_verdict",
    "trace_run",
    "utc_now",
    "verify_capture",
    "verify_run",
    "why_run",
    "write_fixes",
    "write_plan",
]
