"""The end-of-run report on the terminal: the summary (text or JSON, rendered by
cpg_core.reports from the run's report document), a dry run's diffs on stdout, and every
error and tripped check on stderr."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cpg_cli.terminal import say
from cpg_cli.words import flag
from cpg_core import CpgError, RunRequest
from cpg_core.reports import render
from cpg_io.runs import RunResult, run_report

if TYPE_CHECKING:  # a replay's report must not load the live client (grpc)
    from cpg_io.runs import LiveCapture


def warn_about_run(agg: Any, source: str, request: RunRequest) -> None:
    """The one-line warnings every capture command gives after its run."""
    log = logging.getLogger("cpg")
    include_audit = request.capture.include_audit
    if request.capture.l7 and agg.total_flows and not agg.l7_records:
        log.warning(
            "--l7 is set but no flow in %s carried an HTTP or DNS record, so the policies are "
            "L4 only; L7 records need Cilium's L7 proxy on that traffic (see docs/no-policies-yet.md, "
            "'L7 rules: the two-step workflow')",
            source,
        )
    if include_audit and agg.total_flows and not agg.audit_flows:
        log.warning("--include-audit is set but no AUDIT-verdict flow was in %s", source)
    if agg.unrecognised_reasons:
        log.warning(
            "%d drop(s) carried DropReason numbers this cpg does not know (%s): classified as "
            "unknown and treated as candidates; a newer cpg may know them",
            sum(agg.unrecognised_reasons.values()),
            ", ".join(str(code) for code in sorted(agg.unrecognised_reasons)),
        )


def print_run(
    result: RunResult,
    *,
    request: RunRequest,
    source: str,
    output_dir: Path,
    as_json: bool,
    machine_format: str = "json",
    exit_code: int,
    extra_json: dict[str, Any] | None = None,
    verb: str = "Read",
    live: LiveCapture | None = None,
    evidence_dir: Path | None = None,
    relay: str = "",
    inputs: list[str] | None = None,
) -> None:
    """The report on stdout (text or JSON), then every write error and tripped check on
    stderr."""
    report = run_report(
        result,
        request,
        source=source,
        output_dir=output_dir,
        exit_code=exit_code,
        verb=verb,
        extra=extra_json,
        evidence_flag=str(evidence_dir) if evidence_dir is not None else "",
        relay=relay,
        inputs=inputs,
    )
    dry_run = request.dry_run
    if as_json:
        typer.echo(render(report, machine_format).rstrip("\n"))
    else:
        # A dry run's stdout is the diff alone (for patch or a review tool); the summary goes
        # to stderr. On a terminal the diff is cleaned like any other text.
        show = say if sys.stdout.isatty() else typer.echo
        for item in report.files:
            if item.diff:
                show(item.diff, nl=False)
        say(render(report, "text"), err=dry_run)
    for item in report.failed:
        say(f"cpg: error: {item.error}", err=True)
    for error in report.evidence_errors:
        say(f"cpg: error: {error}", err=True)
    if result.verify_error:
        say(f"cpg: error: --verify: {result.verify_error}", err=True)
    if result.stats.truncated:
        say(
            f"cpg: error: {source}: {result.stats.truncated}; policies were generated from "
            "the flows read before that point",
            err=True,
        )
    if result.verify is not None and not result.verify.can_judge:
        say("cpg: --verify: no denied flow of the capture could be checked", err=True)
    elif result.verify is not None and not result.verify.passed:
        say("cpg: --verify: the policies do not admit every candidate flow", err=True)
    if live is not None and live.error:
        failure = live.failure
        why = failure.render(flag) if isinstance(failure, CpgError) else live.error
        say(f"cpg: error: {why}; what arrived before was written", err=True)
    if exit_code == 3 and result.aggregator.infra_drops and request.fail_on_infra_drops:
        say(
            f"cpg: {result.aggregator.infra_drops} infrastructure or transient drop(s) seen "
            "(--fail-on-infra-drops): see the report above",
            err=True,
        )
