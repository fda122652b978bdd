"""The end-of-run summary, written for people reading a terminal or a CI log."""

from __future__ import annotations

from pathlib import Path

from cpg_core.decide import Decision
from cpg_io.pipeline import ReplayResult

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
)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def format_replay_summary(
    result: ReplayResult, *, source: str, output_dir: Path, dry_run: bool
) -> str:
    stats = result.stats
    agg = result.aggregator
    lines = [f"Read {_plural(stats.lines_read, 'line')} from {source}"]
    if stats.malformed:
        shown = ", ".join(str(n) for n in stats.malformed_lines)
        more = " …" if stats.malformed > len(stats.malformed_lines) else ""
        lines.append(f"  malformed lines skipped: {stats.malformed} (line {shown}{more})")
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
    if agg.filtered_namespace:
        lines.append(f"  candidates outside --namespace: {agg.filtered_namespace}")
    if agg.unhandled:
        lines.append("Candidates that cannot become a precise rule:")
        for reason, count in sorted(agg.unhandled.items(), key=lambda kv: (-kv[1], kv[0])):
            examples = [f.subject for f in agg.findings.values() if f.kind == reason.value][:3]
            lines.append(f"  {reason.value:<22} {count:>8}   e.g. {'; '.join(examples)}")
    created = result.count("created")
    updated = result.count("updated")
    unchanged = result.count("unchanged")
    failed = len(result.failed)
    if dry_run:
        lines.append(
            f"Policies (dry run, nothing written): {result.count('would-create')} would be created, "
            f"{result.count('would-update')} updated, {unchanged} unchanged"
            + (f", {failed} failed" if failed else "")
        )
    else:
        lines.append(
            f"Policies in {output_dir}: {created} created, {updated} updated, {unchanged} unchanged"
            + (f", {failed} failed" if failed else "")
        )
    if result.evidence_dir is not None:
        lines.append(
            f"Evidence in {result.evidence_dir} (see: cpg explain NAMESPACE/WORKLOAD -o {output_dir})"
        )
    return "\n".join(lines)
