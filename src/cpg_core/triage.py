"""Triage of the drops no allow rule should fix: infrastructure, transient and noise drops
tallied by reason, node and workload, and findings (explicit denies, auth-required and LB
source-range drops, flows no rule can express) with examples. Feeds ``cluster-health.json``
and the end-of-run report."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import orjson

from cpg_core.attribution import NO_TIME, Sample, sample_of, sample_record
from cpg_core.dropreasons import (
    CLASSIFIER_VERSION,
    DropClass,
    classify_reason,
    reason_name,
    remediation,
)
from cpg_core.flow import Direction, Flow, PolicyRef
from cpg_core.labels import select_labels, workload_name
from cpg_core.synthesis import traffic_subject

HEALTH_SCHEMA_VERSION = 1
MAX_EXAMPLES = 3
UNKNOWN = "_unknown"


def _bump(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def target_key(flow: Flow) -> str:
    """``<namespace>/<workload>`` of the endpoint whose policy applied (``_unknown`` parts)."""
    if flow.direction == Direction.INGRESS:
        target = flow.destination
    elif flow.direction == Direction.EGRESS:
        target = flow.source
    else:
        return f"{UNKNOWN}/{UNKNOWN}"
    workload = workload_name(select_labels(target.labels)) or UNKNOWN
    return f"{target.namespace or UNKNOWN}/{workload}"


@attrs.define(slots=True)
class DropTally:
    """One drop reason: how often, where, to whom."""

    count: int = 0
    by_node: dict[str, int] = attrs.Factory(dict)
    by_workload: dict[str, int] = attrs.Factory(dict)

    def add(self, flow: Flow) -> None:
        self.count += 1
        _bump(self.by_node, flow.node_name or UNKNOWN)
        _bump(self.by_workload, target_key(flow))

    def copy(self) -> DropTally:
        return DropTally(self.count, dict(self.by_node), dict(self.by_workload))

    def absorb(self, other: DropTally) -> None:
        self.count += other.count
        for node, n in other.by_node.items():
            _bump(self.by_node, node, n)
        for workload, n in other.by_workload.items():
            _bump(self.by_workload, workload, n)


def _policy_names(refs: Iterable[PolicyRef]) -> tuple[str, ...]:
    return tuple(sorted({f"{r.namespace}/{r.name}" if r.namespace else r.name for r in refs}))


@attrs.define(slots=True)
class FindingTally:
    """Flows of one kind that became no rule, with the policies that denied them (if named)
    and the newest few as examples."""

    kind: str
    subject: str
    policies: tuple[str, ...] = ()
    count: int = 0
    examples: list[Flow] = attrs.Factory(list)

    def add(self, flow: Flow) -> None:
        self.count += 1
        self.examples.append(flow)
        if len(self.examples) > 2 * MAX_EXAMPLES:
            self.examples = self._newest()

    def _newest(self) -> list[Flow]:
        return sorted(self.examples, key=sample_of)[-MAX_EXAMPLES:]

    def copy(self) -> FindingTally:
        return FindingTally(self.kind, self.subject, self.policies, self.count, list(self.examples))

    def absorb(self, other: FindingTally) -> None:
        self.count += other.count
        self.examples = sorted(self.examples + other.examples, key=sample_of)[-MAX_EXAMPLES:]

    def record(self) -> dict[str, Any]:
        examples = [sample_of(f) for f in self._newest()]
        flows = {sample_of(f): f for f in self.examples}
        out: dict[str, Any] = {"kind": self.kind, "subject": self.subject, "count": self.count}
        if self.policies:
            out["policies"] = list(self.policies)
        out["examples"] = [_example(flows[s], s) for s in sorted(set(examples))]
        return out


def _example(flow: Flow, sample: Sample) -> dict[str, Any]:
    return sample_record(sample, flow.protocol, flow.port)


def deny_finding_key(kind: str, flow: Flow) -> tuple[str, str, tuple[str, ...]]:
    refs = flow.ingress_denied_by if flow.direction == Direction.INGRESS else flow.egress_denied_by
    if not refs:
        refs = flow.ingress_denied_by + flow.egress_denied_by
    return (kind, traffic_subject(flow), _policy_names(refs))


def top_entries(counts: Mapping[str, int], limit: int = 3) -> tuple[list[tuple[str, int]], int]:
    """The ``limit`` largest entries plus every entry tied with the last one, and how many
    more there are."""
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(ordered) <= limit:
        return ordered, 0
    cut = limit
    while cut < len(ordered) and ordered[cut][1] == ordered[limit - 1][1]:
        cut += 1
    return ordered[:cut], len(ordered) - cut


def drop_records(
    drops: Mapping[int, DropTally], classes: Iterable[DropClass]
) -> list[dict[str, Any]]:
    """``drops[]`` of cluster-health.json for the given classes, sorted by reason name."""
    wanted = set(classes)
    records = []
    for code, tally in drops.items():
        cls = classify_reason(code)
        if cls not in wanted:
            continue
        record: dict[str, Any] = {
            "reason": reason_name(code),
            "class": cls.value,
            "count": tally.count,
        }
        link = remediation(code)
        if link:
            record["remediation"] = link
        record["by_node"] = dict(sorted(tally.by_node.items()))
        record["by_workload"] = dict(sorted(tally.by_workload.items()))
        records.append(record)
    records.sort(key=lambda r: str(r["reason"]))
    return records


def severity_order(record: Mapping[str, Any]) -> tuple[int, int, str]:
    """Infra before transient, then the most frequent first."""
    rank = {"infra": 0, "transient": 1, "noise": 2}.get(str(record.get("class")), 3)
    return (rank, -int(record.get("count", 0)), str(record.get("reason")))


@attrs.frozen(slots=True)
class HealthSession:
    started: str
    ended: str
    flows_seen: int
    lost_events: int = 0
    first_flow: str = NO_TIME
    last_flow: str = NO_TIME
    replies: int = 0
    not_a_drop: int = 0


def health_document(
    session: HealthSession,
    drops: Mapping[int, DropTally],
    findings: Iterable[FindingTally],
) -> dict[str, Any]:
    """cluster-health.json: the Go tool's schema v1 fields, then this project's additions."""
    infra = drop_records(drops, (DropClass.INFRA, DropClass.TRANSIENT))
    noise = {r["reason"]: r["count"] for r in drop_records(drops, (DropClass.NOISE,))}
    return {
        "schema_version": HEALTH_SCHEMA_VERSION,
        "classifier_version": CLASSIFIER_VERSION,
        "session": {
            "started": session.started,
            "ended": session.ended,
            "flows_seen": session.flows_seen,
            "infra_drops_total": sum(int(r["count"]) for r in infra),
        },
        "drops": infra,
        "noise": dict(sorted(noise.items())),
        "findings": sorted(
            (f.record() for f in findings), key=lambda r: (r["kind"], -r["count"], r["subject"])
        ),
        "lost_events": session.lost_events,
        "window": {
            "first_flow": session.first_flow or None,
            "last_flow": session.last_flow or None,
        },
        "skipped": {"replies": session.replies, "not_a_drop": session.not_a_drop},
    }


def has_anything_to_report(health: Mapping[str, Any]) -> bool:
    """Whether cluster-health.json is worth writing: drops, findings or lost events."""
    return bool(
        health.get("drops")
        or health.get("findings")
        or health.get("noise")
        or health.get("lost_events")
    )


def render_health(health: Mapping[str, Any]) -> str:
    return orjson.dumps(health, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE).decode()


def capped_breakdowns(health: Mapping[str, Any], limit: int = 100) -> tuple[dict[str, Any], bool]:
    """A copy of a health report whose per-drop ``by_node``/``by_workload`` maps keep at most
    ``limit`` entries (highest counts, ties by name), and whether any was cut. Counts stay the
    true totals."""
    truncated = False
    drops = []
    for drop in health.get("drops") or []:
        drop = dict(drop)
        for key in ("by_node", "by_workload"):
            breakdown: Mapping[str, int] = drop.get(key) or {}
            if len(breakdown) > limit:
                kept = sorted(breakdown.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
                drop[key] = dict(sorted(kept))
                truncated = True
        drops.append(drop)
    return {**health, "drops": drops}, truncated
