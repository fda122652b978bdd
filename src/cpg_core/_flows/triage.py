"""Triage of the drops no allow rule should fix: infrastructure, transient and noise drops
tallied by reason, node and workload, and findings (explicit denies, auth-required and LB
source-range drops, flows no rule can express) with examples. Feeds ``cluster-health.json``
and the end-of-run report."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

import attrs

from cpg_core._base.documents import (
    CaptureWindow,
    ClusterHealth,
    DropRecord,
    Finding,
    HealthSessionRecord,
    SkippedFlows,
)
from cpg_core._base.dropreasons import (
    CLASSIFIER_VERSION,
    DropClass,
    classify_reason,
    reason_name,
    remediation,
)
from cpg_core._base.flow import Direction, Flow, PolicyRef
from cpg_core._base.labels import select_labels, workload_name
from cpg_core._flows.attribution import NO_TIME, sample_of, sample_record
from cpg_core._flows.synthesis import traffic_subject

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


_Key = TypeVar("_Key")
_Tally = TypeVar("_Tally", "DropTally", "FindingTally")


def absorb_tallies(into: dict[_Key, _Tally], other: Mapping[_Key, _Tally]) -> None:
    """Add ``other``'s tallies (:class:`DropTally` or :class:`FindingTally`) to ``into``,
    copying those ``into`` lacks so that the two never share one."""
    for key, tally in other.items():
        known = into.get(key)
        if known is None:
            into[key] = tally.copy()
        else:
            known.absorb(tally)


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

    def record(self) -> Finding:
        examples = [sample_of(f) for f in self._newest()]
        flows = {sample_of(f): f for f in self.examples}
        return Finding(
            kind=self.kind,
            subject=self.subject,
            count=self.count,
            policies=self.policies,
            examples=tuple(
                sample_record(s, flows[s].protocol, flows[s].port) for s in sorted(set(examples))
            ),
        )


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


def drop_records(drops: Mapping[int, DropTally], classes: Iterable[DropClass]) -> list[DropRecord]:
    """``drops[]`` of cluster-health.json for the given classes, sorted by reason name."""
    wanted = set(classes)
    records = []
    for code, tally in drops.items():
        cls = classify_reason(code)
        if cls not in wanted:
            continue
        records.append(
            DropRecord(
                reason=reason_name(code),
                drop_class=cls.value,
                count=tally.count,
                remediation=remediation(code) or "",
                by_node=dict(sorted(tally.by_node.items())),
                by_workload=dict(sorted(tally.by_workload.items())),
            )
        )
    records.sort(key=lambda r: r.reason)
    return records


def severity_order(record: DropRecord) -> tuple[int, int, str]:
    """Infra before transient, then the most frequent first."""
    rank = {"infra": 0, "transient": 1, "noise": 2}.get(record.drop_class, 3)
    return (rank, -record.count, record.reason)


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
) -> ClusterHealth:
    """cluster-health.json: the Go tool's schema v1 fields, then this project's additions."""
    infra = drop_records(drops, (DropClass.INFRA, DropClass.TRANSIENT))
    noise = {r.reason: r.count for r in drop_records(drops, (DropClass.NOISE,))}
    return ClusterHealth(
        classifier_version=CLASSIFIER_VERSION,
        session=HealthSessionRecord(
            started=session.started,
            ended=session.ended,
            flows_seen=session.flows_seen,
            infra_drops_total=sum(r.count for r in infra),
        ),
        drops=tuple(infra),
        noise=dict(sorted(noise.items())),
        findings=tuple(
            sorted((f.record() for f in findings), key=lambda r: (r.kind, -r.count, r.subject))
        ),
        lost_events=session.lost_events,
        window=CaptureWindow(session.first_flow or None, session.last_flow or None),
        skipped=SkippedFlows(replies=session.replies, not_a_drop=session.not_a_drop),
    )


def capped_breakdowns(health: ClusterHealth, limit: int = 100) -> tuple[ClusterHealth, bool]:
    """The report with per-drop ``by_node``/``by_workload`` maps of at most ``limit`` entries
    (highest counts, ties by name), and whether any was cut. Counts stay the true totals."""

    def cap(breakdown: Mapping[str, int]) -> dict[str, int]:
        if len(breakdown) <= limit:
            return dict(breakdown)
        return dict(sorted(sorted(breakdown.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]))

    truncated = any(len(d.by_node) > limit or len(d.by_workload) > limit for d in health.drops)
    drops = tuple(
        attrs.evolve(d, by_node=cap(d.by_node), by_workload=cap(d.by_workload))
        for d in health.drops
    )
    return attrs.evolve(health, drops=drops), truncated
