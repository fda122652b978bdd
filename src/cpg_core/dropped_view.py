"""The composed view of dropped flows that ``list_dropped_flows`` serves: sampled flows from the
per-rule evidence (the drops a policy can fix) and per-workload counts from the cluster-health
report (the drops it cannot). A sampled view, not a flow log: samples are capped per rule."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from cpg_core.dropreasons import REASON_CODES, DropClass, classify_reason

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


def flow_samples(namespace: str, workload: str, doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per stored sample of every rule of one evidence document, in file order."""
    rows = []
    for rule in doc.get("rules") or []:
        for sample in rule.get("samples") or []:
            row: dict[str, Any] = {
                "namespace": namespace,
                "workload": workload,
                "direction": rule.get("direction", ""),
                "peer": rule.get("peer", {}),
                "port": str(rule.get("port", "")),
                "protocol": str(rule.get("protocol", "")),
                "time": sample.get("time", ""),
                "src": sample.get("src", {}),
                "dst": sample.get("dst", {}),
                "verdict": sample.get("verdict", ""),
            }
            if sample.get("drop_reason"):
                row["drop_reason"] = sample["drop_reason"]
            rows.append(row)
    return rows


def aggregate_rows(health: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``drops[].by_workload`` of a cluster-health report as rows sorted by namespace, workload
    and reason. A key without ``/`` belongs to namespace ``_unknown``."""
    rows = []
    for drop in health.get("drops") or []:
        for key, count in (drop.get("by_workload") or {}).items():
            namespace, sep, workload = str(key).partition("/")
            if not sep:
                namespace, workload = UNKNOWN_NAMESPACE, str(key)
            rows.append(
                {
                    "namespace": namespace,
                    "workload": workload,
                    "reason": str(drop.get("reason", "")),
                    "class": str(drop.get("class", "")),
                    "count": int(count),
                }
            )
    rows.sort(key=lambda r: (r["namespace"], r["workload"], r["reason"]))
    return rows


def compose(
    samples: Iterable[Mapping[str, Any]],
    aggregates: Iterable[Mapping[str, Any]],
    flt: DroppedFlowFilter,
) -> list[tuple[str, Mapping[str, Any]]]:
    """Filtered samples and rows in one list tagged ``sample``/``aggregate``, stably sorted by
    (namespace, workload) with samples before rows inside a group."""

    def common(row: Mapping[str, Any]) -> bool:
        return (flt.namespace is None or row["namespace"] == flt.namespace) and (
            flt.workload is None or row["workload"] == flt.workload
        )

    items: list[tuple[str, Mapping[str, Any]]] = [
        ("sample", s)
        for s in samples
        if common(s)
        and (flt.direction is None or s["direction"] == flt.direction)
        and (flt.dropclass is None or sample_class(s.get("drop_reason")) == flt.dropclass)
    ]
    items += [
        ("aggregate", r)
        for r in aggregates
        if common(r) and (flt.dropclass is None or r["class"] == flt.dropclass)
    ]
    items.sort(key=lambda item: (item[1]["namespace"], item[1]["workload"], item[0] != "sample"))
    return items
