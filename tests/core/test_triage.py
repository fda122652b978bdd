from __future__ import annotations

from typing import Any

import pytest

from conftest import WORLD, endpoint, flow_dict
from cpg_core._base.documents import ClusterHealth, DropRecord, HealthSessionRecord
from cpg_core._base.dropreasons import (
    DROP_REASONS,
    DropClass,
    levenshtein,
    parse_reason_name,
    remediation,
    suggest_reasons,
)
from cpg_core._flows.decide import DecideOptions, Decision
from cpg_core._flows.parse import parse_flow
from cpg_core._flows.triage import severity_order, top_entries
from cpg_core._review.wire import to_data
from cpg_core._synthesis.aggregate import AggregateOptions, Aggregator


def aggregate(*flows: dict[str, Any], **options: Any) -> Aggregator:
    agg = Aggregator(AggregateOptions(**options))
    for f in flows:
        agg.add(parse_flow(f))
    return agg


@pytest.mark.parametrize(
    ("reason", "cls", "decision"),
    [
        ("CT_MAP_INSERTION_FAILED", DropClass.INFRA, Decision.INFRA),
        ("DROP_EP_NOT_READY", DropClass.TRANSIENT, Decision.TRANSIENT),
        ("IS_A_CLUSTERIP", DropClass.NOISE, Decision.NOISE),
        ("POLICY_DENIED", DropClass.POLICY, Decision.CANDIDATE),
    ],
)
def test_one_drop_per_class(reason: str, cls: DropClass, decision: Decision) -> None:
    agg = aggregate(flow_dict(reason=reason, node_name="n1"))
    assert agg.decisions == {decision: 1}
    code = parse_reason_name(reason)
    assert DROP_REASONS[code][1] is cls
    if cls in (DropClass.INFRA, DropClass.TRANSIENT, DropClass.NOISE):
        tally = agg.drops[code]
        assert (tally.count, tally.by_node, tally.by_workload) == (1, {"n1": 1}, {"shop/cart": 1})
        assert not agg.plans()
    else:
        assert not agg.drops and agg.plans()


def test_unknown_reason_numbers_are_unknown_candidates_and_are_reported() -> None:
    agg = aggregate(
        flow_dict(reason=None, drop_reason=250), flow_dict(reason=None, drop_reason=250, tcp=81)
    )
    assert agg.decisions == {Decision.CANDIDATE: 2}
    assert agg.unrecognised_reasons == {250: 2}
    assert len(agg.plans()) == 1


def finding(agg: Aggregator) -> dict[str, Any]:
    (only,) = agg.findings.values()
    record: dict[str, Any] = to_data(only.record())
    return record


def test_explicit_deny_names_the_denying_policy() -> None:
    deny = [{"name": "deny-shop", "namespace": "payments", "kind": "CiliumNetworkPolicy"}]
    agg = aggregate(
        *[
            flow_dict(
                src=endpoint("shop", "cart"),
                dst=endpoint("payments", "ledger"),
                tcp=5432,
                reason="POLICY_DENY",
                ingress_denied_by=deny,
                time=f"2026-11-02T10:00:0{i}Z",
            )
            for i in range(5)
        ]
    )
    record = finding(agg)
    assert record["kind"] == "explicit_deny"
    assert record["subject"] == "shop/cart → payments/ledger TCP/5432"
    assert record["policies"] == ["payments/deny-shop"]
    assert record["count"] == 5
    assert [e["time"][17:19] for e in record["examples"]] == ["02", "03", "04"]
    assert not agg.plans(), "an explicit deny never becomes an allow rule"


@pytest.mark.parametrize(
    ("flow", "kind", "subject"),
    [
        (flow_dict(reason="AUTH_REQUIRED"), "auth_required", "shop/frontend → shop/cart TCP/8080"),
        (
            flow_dict(src=WORLD, reason="DENIED_BY_LB_SRC_RANGE_CHECK", tcp=443),
            "lb_source_range",
            "world → shop/cart TCP/443",
        ),
        (flow_dict(src=endpoint("shop", None, pod_name="x-1")), "unselectable", "shop/x-1 (peer)"),
        (flow_dict(dst={"labels": ["k8s:app=x"]}), "no_namespace", None),
        (flow_dict(dst={"identity": 1, "labels": ["reserved:host"]}), "reserved_target", None),
        (flow_dict(tcp=None), "no_l4", "shop/frontend → shop/cart no-L4"),
        (flow_dict(tcp=0), "no_port", "shop/frontend → shop/cart TCP/0"),
        (flow_dict(direction="TRAFFIC_DIRECTION_UNKNOWN"), "unknown_direction", None),
        (flow_dict(src=WORLD, src_ip=""), "world_no_ip", None),
        (
            flow_dict(tcp=None, l4={"VRRP": {"type": 1}}),
            "unsupported_protocol",
            "shop/frontend → shop/cart VRRP/0",
        ),
    ],
)
def test_each_finding_kind(flow: dict[str, Any], kind: str, subject: str | None) -> None:
    agg = aggregate(flow)
    record = finding(agg)
    assert record["kind"] == kind
    assert record["count"] == 1 and len(record["examples"]) == 1
    if subject is not None:
        assert record["subject"] == subject
    assert not agg.plans()


def test_ignore_drop_reason_skips_before_classification() -> None:
    options = {"decide": DecideOptions(ignore_reasons=frozenset({155}))}
    agg = aggregate(flow_dict(reason="CT_MAP_INSERTION_FAILED"), flow_dict(), **options)
    assert agg.decisions == {Decision.IGNORED_REASON: 1, Decision.CANDIDATE: 1}
    assert agg.ignored_reasons == {"CT_MAP_INSERTION_FAILED": 1}
    assert not agg.drops
    # Ignoring POLICY_DENIED turns off the fast path: those drops are skipped too.
    agg = aggregate(flow_dict(), decide=DecideOptions(ignore_reasons=frozenset({133})))
    assert agg.decisions == {Decision.IGNORED_REASON: 1}


def test_reason_names_and_suggestions() -> None:
    assert parse_reason_name("ct_map_insertion_failed") == 155
    assert parse_reason_name(" Policy_Denied ") == 133
    assert parse_reason_name("DROP_REASON_UNKNOWN") == 0
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("CT_MAP_INSERT_FAIL", "CT_MAP_INSERTION_FAILED") == 5
    assert suggest_reasons("CT_MAP_INSERT_FAIL")[0] == "CT_MAP_INSERTION_FAILED"
    assert len(suggest_reasons("POLICY")) <= 5
    assert suggest_reasons("ZZZZZ") == []
    with pytest.raises(ValueError, match="did you mean CT_MAP_INSERTION_FAILED"):
        parse_reason_name("CT_MAP_INSERT_FAIL")
    with pytest.raises(ValueError, match="dropreason for the full list") as err:
        parse_reason_name("ZZZZZ")
    assert "did you mean" not in str(err.value)


def test_remediation_links() -> None:
    assert remediation(155).startswith("https://docs.cilium.io/")
    assert remediation(133) == "" and remediation(190) == ""


def test_top_entries_keep_ties_with_the_third() -> None:
    assert top_entries({"a": 5, "b": 4, "c": 3, "d": 3, "e": 1}) == (
        [("a", 5), ("b", 4), ("c", 3), ("d", 3)],
        1,
    )
    assert top_entries({"a": 1, "b": 1}) == ([("a", 1), ("b", 1)], 0)


def test_severity_order() -> None:
    records = [
        DropRecord(reason="T", drop_class="transient", count=50),
        DropRecord(reason="A", drop_class="infra", count=1),
        DropRecord(reason="B", drop_class="infra", count=9),
    ]
    assert [r.reason for r in sorted(records, key=severity_order)] == ["B", "A", "T"]


def test_parallel_halves_merge_to_the_whole() -> None:
    flows = [
        flow_dict(reason="CT_MAP_INSERTION_FAILED", node_name=f"n{i % 3}") for i in range(6)
    ] + [flow_dict(reason="POLICY_DENY", time=f"2026-11-02T10:00:0{i}Z") for i in range(6)]
    whole = aggregate(*flows)
    left, right = aggregate(*flows[::2]), aggregate(*flows[1::2])
    left.absorb(right.state())
    assert {k: f.record() for k, f in left.findings.items()} == {
        k: f.record() for k, f in whole.findings.items()
    }
    assert {c: (t.count, t.by_node) for c, t in left.drops.items()} == {
        c: (t.count, t.by_node) for c, t in whole.drops.items()
    }
    assert left.window() == whole.window()


def test_capped_breakdowns_keep_the_largest_and_the_true_count() -> None:
    from cpg_core._flows.triage import capped_breakdowns

    by_node = {f"node-{i:03}": i for i in range(1, 151)}
    report = health(DropRecord("X", "infra", 11325, by_node=by_node))
    capped, truncated = capped_breakdowns(report, limit=100)
    kept = capped.drops[0].by_node
    assert truncated and len(kept) == 100 and min(kept.values()) == 51
    assert capped.drops[0].count == 11325
    assert report.drops[0].by_node is by_node and len(by_node) == 150, "input untouched"
    same, cut = capped_breakdowns(health(DropRecord("Y", "infra", 1, by_node={"a": 1})))
    assert not cut and same.drops[0].by_node == {"a": 1}


def health(*drops: DropRecord) -> ClusterHealth:
    return ClusterHealth(
        classifier_version="t", session=HealthSessionRecord("", "", 0, 0), drops=drops
    )
