"""The composed view of dropped flows that ``list_dropped_flows`` serves: sampled flows from the
per-rule evidence (the drops a policy can fix) and per-workload counts from the cluster-health
report (the drops it cannot). A sampled view, not a flow log: samples are capped per rule."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from cpg_core._base.documents import (
    ClusterHealth,
    DroppedFlowCount,
    DroppedFlowRow,
    DroppedFlowSample,
    PolicyEvidence,
)
from cpg_core._base.dropreasons import REASON_CODES, DropClass, classify_reason

UNKNOWN_NAMESPACE = "_unknown"


@attrs.frozen(slots=True)
class DroppedFlowFilter:
    """Exact-match filters; ``None`` means unset. ``direction`` narrows samples only, because
    the health counts carry no direction."""

    namespace: str | None = None
    workload: str | None = None
    dropclass: str | None = None
    direction: str | None = None


def sample_class(drop_reason: str | None) -> str:
    """The class of a stored sample, recomputed from its reason name. A missing, unknown or
    zero reason is ``unknown``: such a flow reached the policy path by construction."""
    code = REASON_CODES.get(drop_reason or "")
    if not code:
        return DropClass.UNKNOWN.value
    return classify_reason(code).value


def flow_samples(namespace: str, workload: str, doc: PolicyEvidence) -> list[DroppedFlowSample]:
    """One row per stored sample of every rule of one evidence document, in file order."""
    return [
        DroppedFlowSample(
            namespace=namespace,
            workload=workload,
            direction=rule.direction,
            peer=rule.peer,
            port=rule.port,
            protocol=rule.protocol,
            time=sample.time,
            src=sample.src,
            dst=sample.dst,
            verdict=sample.verdict,
            drop_reason=sample.drop_reason,
        )
        for rule in doc.rules
        for sample in rule.samples
    ]


def aggregate_rows(health: ClusterHealth | None) -> list[DroppedFlowCount]:
    """``drops[].by_workload`` of a cluster-health report as rows sorted by namespace, workload
    and reason. A key without ``/`` belongs to namespace ``_unknown``."""
    rows = []
    for drop in health.drops if health is not None else ():
        for key, count in drop.by_workload.items():
            namespace, sep, workload = key.partition("/")
            if not sep:
                namespace, workload = UNKNOWN_NAMESPACE, key
            rows.append(DroppedFlowCount(namespace, workload, drop.reason, drop.drop_class, count))
    rows.sort(key=lambda r: (r.namespace, r.workload, r.reason))
    return rows


def compose(
    samples: Iterable[DroppedFlowSample],
    aggregates: Iterable[DroppedFlowCount],
    flt: DroppedFlowFilter,
) -> list[DroppedFlowRow]:
    """Filtered samples and counts in one list, stably sorted by (namespace, workload) with
    samples before counts inside a group."""

    def common(row: DroppedFlowRow) -> bool:
        return (flt.namespace is None or row.namespace == flt.namespace) and (
            flt.workload is None or row.workload == flt.workload
        )

    items: list[DroppedFlowRow] = [
        s
        for s in samples
        if common(s)
        and (flt.direction is None or s.direction == flt.direction)
        and (flt.dropclass is None or sample_class(s.drop_reason) == flt.dropclass)
    ]
    items += [
        r
        for r in aggregates
        if common(r) and (flt.dropclass is None or r.drop_class == flt.dropclass)
    ]
    items.sort(key=lambda r: (r.namespace, r.workload, isinstance(r, DroppedFlowCount)))
    return items
