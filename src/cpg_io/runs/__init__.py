"""The run layer: one function per use case, each taking the typed request both roots build
and returning a typed result. The CLI and cpg-mcp are flags or tool arguments → request →
run → rendering; nothing here knows which of them called."""

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
