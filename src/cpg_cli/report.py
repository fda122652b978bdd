"""The end-of-run report: text made for people reading a terminal or a CI log, and the same
facts as JSON for machines (``--output json``)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import attrs
import typer

from cpg_cli.terminal import say
from cpg_core import Decision, RunRequest, to_data
from cpg_core.reports import severity_order, top_entries
from cpg_io.runs import RunResult

_DECISION_LABELS = (
    (Decision.CANDIDATE, "candidates (denied, no allow rule)"),
    (Decision.REPLY, "replies (skipped)"),
    (Decision.NOT_A_DROP, "not a drop (forwarded, traced…)"),
    (Decision.INFRA, "infrastructure drops"),
    (Decision.TRANSIENT, "transient drops"),
    (Decision.NOISE, "noise"),
    (Decision.EXPLICIT_DENY, "explicit deny (never allowed)"),
    (Decision.AUTH_REQUIRED, "auth required"),
    (Decision.LB_SOURCE_RANGE, "LB source range denied"),
    (Decision.IGNORED_PROTOCOL, "ignored protocol"),
    (Decision.IGNORED_REASON, "ignored drop reason"),
    (Decision.OUTSIDE_WINDOW, "outside --since/--until"),
)
MAX_FINDINGS_SHOWN = 20
REDACTED_NOTE = (
    "Evidence redacted (--evidence-redact): the IP addresses of its sample flows were not "
    "written; pod names, labels and CIDR peers (which the policies name) were."
)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _top(counts: dict[str, int]) -> str:
    if not counts:
        return "(none)"
    shown, more = top_entries(counts)
    text = ", ".join(f"{name} ({n})" for name, n in shown)
    return text + (f" (+{more} more)" if more else "")


def health_location(result: RunResult, *, dry_run: bool, evidence: bool) -> str:
    if result.health_path is not None:
        return str(result.health_path)
    if not evidence:
        return "(evidence disabled: not written)"
    if dry_run:
        return "(dry run: not written)"
    return "(nothing to report: not written)"


def format_replay_summary(
    result: RunResult, *, source: str, output_dir: Path, dry_run: bool, evidence: bool = True
) -> str:
    stats = result.stats
    agg = result.aggregator
    lines = [f"Read {_plural(stats.lines_read, 'line')} from {source}"]
    if stats.malformed:
        shown = ", ".join(str(n) for n in stats.malformed_lines)
        more = " …" if stats.malformed > len(stats.malformed_lines) else ""
        content = max(1, stats.lines_read - stats.blank_lines)
        lines.append(
            f"  malformed lines skipped: {stats.malformed} of {content} "
            f"({100 * stats.malformed / content:.1f} %; line {shown}{more})"
        )
    if stats.blank_lines:
        lines.append(f"  blank lines: {stats.blank_lines}")
    if stats.other_records:
        lines.append(f"  non-flow records (node status…): {stats.other_records}")
    if stats.lost_events:
        lines.append(
            f"  Hubble reported {stats.lost_events} lost events: the capture is incomplete"
        )
    lines.append(f"Flows: {agg.total_flows}")
    width = max(len(label) for _, label in _DECISION_LABELS)
    for decision, label in _DECISION_LABELS:
        count = agg.decisions.get(decision, 0)
        if count or decision is Decision.CANDIDATE:
            lines.append(f"  {label:<{width}}  {count:>8}")
    if agg.ignored_protocols:
        ignored = ", ".join(f"{p} {n}" for p, n in sorted(agg.ignored_protocols.items()))
        lines.append(f"    by protocol: {ignored}")
    if agg.ignored_reasons:
        ignored = ", ".join(f"{r} {n}" for r, n in sorted(agg.ignored_reasons.items()))
        lines.append(f"    by reason: {ignored}")
    if agg.filtered_namespace:
        lines.append(f"  candidates outside --namespace: {agg.filtered_namespace}")

    drops = sorted(result.health.drops if result.health else (), key=severity_order)
    if drops:
        lines.append("")
        lines.append("Infrastructure and transient drops (no policy can fix these):")
        name_width = max(len(d.reason) for d in drops)
        for drop in drops:
            lines.append(
                f"  {drop.reason:<{name_width}}  {drop.drop_class:<9}  {_plural(drop.count, 'flow')}"
            )
            lines.append(f"    top nodes:     {_top(drop.by_node)}")
            lines.append(f"    top workloads: {_top(drop.by_workload)}")
            if drop.remediation:
                lines.append(f"    fix:           {drop.remediation}")
    findings = result.health.findings if result.health else ()
    if findings:
        lines.append("")
        lines.append("Findings (traffic that got no allow rule, on purpose or because none fits):")
        for finding in sorted(findings, key=lambda f: (-f.count, f.kind, f.subject))[
            :MAX_FINDINGS_SHOWN
        ]:
            label, what, fix = finding.advice()
            lines.append(f"  {label} ({_plural(finding.count, 'flow')}): {what}")
            if fix:
                lines.append(f"    fix: {fix}")
        if len(findings) > MAX_FINDINGS_SHOWN:
            lines.append(f"  (+{len(findings) - MAX_FINDINGS_SHOWN} more in cluster-health.json)")

    lines.append("")
    in_cluster = result.count("in-cluster")
    cluster = f", {in_cluster} already in the cluster" if in_cluster else ""
    created = result.count("created")
    updated = result.count("updated")
    unchanged = result.count("unchanged")
    failed = len(result.failed)
    if dry_run:
        lines.append(
            f"Policies (dry run, nothing written): {result.count('would-create')} would be created, "
            f"{result.count('would-update')} updated, {unchanged} unchanged{cluster}"
            + (f", {failed} failed" if failed else "")
        )
    else:
        lines.append(
            f"Policies in {output_dir}: {created} created, {updated} updated, {unchanged} unchanged"
            + cluster
            + (f", {failed} failed" if failed else "")
        )
    changed = [f for f in result.files if f.outcome in _CHANGED]
    for item in changed[:MAX_FILES_SHOWN]:
        lines.append(f"  {item.outcome:<12} {_relative(item.path, output_dir)}")
    if len(changed) > MAX_FILES_SHOWN:
        lines.append(f"  … and {len(changed) - MAX_FILES_SHOWN} more")
    if result.held_back:
        lines.append(
            f"Held back (seen fewer than --min-flows {result.min_flows} times; not written): "
            f"{len(result.held_back)}"
        )
        for held in result.held_back[:MAX_FILES_SHOWN]:
            lines.append(
                f"  {held.namespace}/{held.workload}: {held.rule} ({_plural(held.flows, 'flow')})"
            )
        if len(result.held_back) > MAX_FILES_SHOWN:
            lines.append(f"  … and {len(result.held_back) - MAX_FILES_SHOWN} more (-o json)")
    if result.evidence_dir is not None:
        lines.append(
            f"Evidence in {result.evidence_dir} (see: cpg explain NAMESPACE/WORKLOAD -d {output_dir})"
        )
    if drops or findings or stats.lost_events:
        lines.append(
            f"cluster-health.json: {health_location(result, dry_run=dry_run, evidence=evidence)}"
        )
    if changed and not dry_run:
        capture = source if source != "standard input" else "CAPTURE"
        first = changed[0].plan
        target = f"{first.namespace}/{first.workload}" if first else "NAMESPACE/WORKLOAD"
        lines += ["", "Next steps:"]
        apply = "-k" if result.kustomized else "-R -f"
        lines.append(
            f"  review:  kubectl diff {apply} {output_dir}   (reads the cluster, changes nothing)"
        )
        lines.append(f"  check:   cpg verify {capture} -d {output_dir}")
        lines.append(f"  plan:    cpg plan CAPTURE-WITH-EVERY-VERDICT -d {output_dir}")
        if result.evidence_dir is not None:
            lines.append(f"  explain: cpg explain {target} -d {output_dir}")
        lines.append(f"  apply:   kubectl apply {apply} {output_dir}   (yourself, once reviewed)")
    return "\n".join(lines)


_CHANGED = ("created", "updated", "would-create", "would-update")
MAX_FILES_SHOWN = 20


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def replay_summary_json(
    result: RunResult,
    *,
    source: str,
    output_dir: Path,
    dry_run: bool,
    evidence: bool = True,
    exit_code: int = 0,
) -> dict[str, Any]:
    """The same facts as the text report, for machines."""
    stats = result.stats
    agg = result.aggregator
    health = result.health
    return {
        "source": source,
        "output_dir": str(output_dir),
        "dry_run": dry_run,
        "lines_read": stats.lines_read,
        "blank_lines": stats.blank_lines,
        "malformed": {
            "count": stats.malformed,
            "examples": [{"line": n, "error": why} for n, why in stats.malformed_examples],
        },
        "truncated": stats.truncated or None,
        "lost_events": stats.lost_events,
        "flows": {"total": agg.total_flows}
        | {d.value: agg.decisions.get(d, 0) for d, _ in _DECISION_LABELS},
        "ignored": {
            "protocols": dict(sorted(agg.ignored_protocols.items())),
            "drop_reasons": dict(sorted(agg.ignored_reasons.items())),
        },
        "outside_namespaces": agg.filtered_namespace,
        "policies": [
            {
                "path": str(f.path),
                "outcome": f.outcome,
                **(
                    {
                        "namespace": f.plan.namespace,
                        "workload": f.plan.workload,
                        "name": f.plan.name,
                    }
                    if f.plan is not None
                    else {}
                ),
                **({"error": f.error} if f.error else {}),
                **({"diff": f.diff} if f.diff else {}),
            }
            for f in result.files
        ],
        "drops": to_data(sorted(health.drops, key=severity_order)) if health else [],
        "noise": dict(health.noise) if health else {},
        "findings": [
            {
                **to_data(finding),
                **dict(zip(("label", "explanation", "fix"), finding.advice(), strict=True)),
            }
            for finding in health.findings
        ]
        if health
        else [],
        "window": to_data(health.window) if health else None,
        "evidence_dir": str(result.evidence_dir) if result.evidence_dir else None,
        "cluster_health": str(result.health_path) if result.health_path else None,
        "held_back": [attrs.asdict(held) for held in result.held_back],
        "errors": [f.error for f in result.failed] + list(result.evidence_errors),
        "exit_code": exit_code,
    }


def warn_about_run(agg: Any, source: str, *, l7: bool, include_audit: bool) -> None:
    """The one-line warnings every capture command gives after its run."""
    log = logging.getLogger("cpg")
    if l7 and agg.total_flows and not agg.l7_records:
        log.warning(
            "--l7 is set but no flow in %s carried an HTTP or DNS record, so the policies are "
            "L4 only; L7 records need Cilium's L7 proxy on that traffic (see the README section "
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
    exit_code: int,
    extra_json: dict[str, Any] | None = None,
    verb: str = "Read",
) -> None:
    """The report on stdout (text or JSON), then every write error and tripped check on
    stderr."""
    dry_run = request.dry_run
    evidence = request.evidence.record
    checked = result.verify
    extra_lines = []
    if checked is not None:
        extra_lines = [
            f"  verify: {check.traffic}: {check.reason}"
            for check in checked.checks
            if check.allowed == (check.kind == "explicit_deny")
        ]
        extra_lines.append(f"Verify: {checked.summary()}")
        extra_json = (extra_json or {}) | {"verify": to_data(checked)}
    if request.evidence.redact and evidence:
        extra_lines.append(REDACTED_NOTE)
    if as_json:
        summary = replay_summary_json(
            result,
            source=source,
            output_dir=output_dir,
            dry_run=dry_run,
            evidence=evidence,
            exit_code=exit_code,
        )
        summary.update(extra_json or {})
        typer.echo(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        # A dry run's stdout is the diff alone (for patch or a review tool); the summary goes
        # to stderr. On a terminal the diff is cleaned like any other text.
        show = say if sys.stdout.isatty() else typer.echo
        for item in result.files:
            if item.diff:
                show(item.diff, nl=False)
        text = format_replay_summary(
            result, source=source, output_dir=output_dir, dry_run=dry_run, evidence=evidence
        )
        say(text.replace("Read ", f"{verb} ", 1), err=dry_run)
        for line in extra_lines or []:
            say(line, err=dry_run)
    for item in result.failed:
        say(f"cpg: error: {item.error}", err=True)
    for error in result.evidence_errors:
        say(f"cpg: error: {error}", err=True)
    if result.verify_error:
        say(f"cpg: error: --verify: {result.verify_error}", err=True)
    if result.stats.truncated:
        say(
            f"cpg: error: {source}: {result.stats.truncated}; policies were generated from "
            "the flows read before that point",
            err=True,
        )
    if checked is not None and not checked.passed:
        say("cpg: --verify: the policies do not admit every candidate flow", err=True)
    if exit_code == 3 and result.aggregator.infra_drops and request.fail_on_infra_drops:
        say(
            f"cpg: {result.aggregator.infra_drops} infrastructure or transient drop(s) seen "
            "(--fail-on-infra-drops): see the report above",
            err=True,
        )
