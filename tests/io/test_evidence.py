from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLE, WORLD, endpoint, flow_dict
from cpg_core._base.documents import PolicyEvidence, RuleEvidence, SessionInfo, SessionSource
from cpg_core._base.rules import Atom, CidrPeer, EndpointPeer, EntityPeer
from cpg_core._flows.attribution import time_key
from cpg_core._flows.parse import parse_flow
from cpg_core._review.evidence import (
    EvidenceError,
    merge_evidence,
    parse_evidence,
    render_evidence,
    rule_key,
    rule_records,
)
from cpg_core._review.explain import ExplainFilter, render_explain_json
from cpg_core._review.wire import from_data, to_data
from cpg_core._synthesis.aggregate import AggregateOptions, Aggregator
from cpg_io.engines import in_memory
from cpg_io.runs._output import EvidenceSettings
from cpg_io.runs._replay import replay_capture


def session(sid: str, started: str = "2026-11-29T10:00:00.000000Z", **kw: Any) -> SessionInfo:
    return SessionInfo(
        id=sid,
        started_at=started,
        ended_at=started,
        cpg_version="test",
        source=SessionSource(type="replay"),
        **kw,
    )


def records(*flows: dict[str, Any], max_samples: int = 10, sid: str = "s1") -> list[dict[str, Any]]:
    """The rule evidence of one run, as wire data (what the file holds)."""
    agg = Aggregator(AggregateOptions(max_samples=max_samples))
    for f in flows:
        agg.add(parse_flow(f))
    (plan,) = agg.plans()
    rules = rule_records(plan.attribution, sid, max_samples)
    assert from_data(to_data(rules), list[RuleEvidence]) == rules, "round trip"
    data: list[dict[str, Any]] = to_data(rules)
    return data


def test_rule_keys_name_direction_peer_with_namespace_protocol_and_port() -> None:
    assert rule_key(Atom("ingress", EndpointPeer("shop", (("app", "web"),)), "TCP", 8080)) == (
        "ingress:ep:shop/app=web:TCP:8080"
    )
    assert (
        rule_key(Atom("egress", CidrPeer("8.8.8.8/32"), "UDP", 53))
        == "egress:cidr:8.8.8.8/32:UDP:53"
    )
    assert (
        rule_key(Atom("egress", EntityPeer("host"), "ICMPv4", 8)) == "egress:entity:host:ICMPv4:8"
    )


def test_time_keys_sort_like_times() -> None:
    assert time_key("2026-01-01T00:00:00Z") == "2026-01-01T00:00:00.000000000Z"
    assert time_key("2026-01-01T00:00:00.5Z") == "2026-01-01T00:00:00.500000000Z"
    assert time_key("2026-01-01T02:00:00.123456789+02:00") == "2026-01-01T00:00:00.123456789Z"
    assert time_key("garbage") == "" and time_key("") == ""
    assert time_key("2026-01-01T00:00:00Z") < time_key("2026-01-01T00:00:00.5Z")


def pod(name: str) -> dict[str, Any]:
    return endpoint("shop", "frontend", pod_name=name)


def test_attribution_counts_times_classes_and_newest_samples() -> None:
    flows = [
        flow_dict(src=pod(f"fe-{s}"), time=f"2026-11-02T10:00:{s:02d}Z", reason="POLICY_DENIED")
        for s in (30, 5, 50, 12)
    ]
    flows.append(flow_dict(src=pod("fe-40"), time="2026-11-02T10:00:40Z", reason=None))
    (rule,) = records(*flows, max_samples=3)
    assert rule["flow_count"] == 5
    assert rule["first_seen"] == "2026-11-02T10:00:05.000000000Z"
    assert rule["last_seen"] == "2026-11-02T10:00:50.000000000Z"
    assert rule["classes"] == {"policy": 4, "unknown": 1}
    assert [s["time"][17:19] for s in rule["samples"]] == ["30", "40", "50"]
    sample = rule["samples"][-1]
    assert sample["src"] == {
        "namespace": "shop",
        "workload": "frontend",
        "pod": "fe-50",
        "ip": "10.0.0.1",
    }
    assert sample["dst"]["workload"] == "cart" and sample["port"] == 8080
    assert sample["verdict"] == "DROPPED" and sample["drop_reason"] == "POLICY_DENIED"


def test_one_sample_per_endpoint_pair_the_newest() -> None:
    flows = [flow_dict(src=pod("fe-a"), time=f"2026-11-02T10:00:{s:02d}Z") for s in (1, 9, 5)]
    flows.append(flow_dict(src=pod("fe-b"), time="2026-11-02T10:00:03Z"))
    (rule,) = records(*flows)
    assert rule["flow_count"] == 4
    assert [(s["src"]["pod"], s["time"][17:19]) for s in rule["samples"]] == [
        ("fe-b", "03"),
        ("fe-a", "09"),
    ]


def test_samples_do_not_depend_on_flow_order() -> None:
    # Same time everywhere: the choice falls to content, never to arrival order.
    flows = [
        flow_dict(src=pod(f"fe-{i}"), time="2026-11-02T10:00:00Z", src_ip=f"10.0.0.{i}")
        for i in range(8)
    ]
    flows += [
        flow_dict(src=pod(f"fe-{i}"), time="2026-11-02T10:00:00Z", src_ip=f"10.0.1.{i}")
        for i in range(8)
    ]
    forward = records(*flows, max_samples=3)
    backward = records(*reversed(flows), max_samples=3)
    assert forward == backward
    assert [s["src"]["ip"] for s in forward[0]["samples"]] == ["10.0.1.5", "10.0.1.6", "10.0.1.7"]


def test_audit_flows_are_their_own_class() -> None:
    agg = Aggregator(
        AggregateOptions(decide=__import__("cpg_core").DecideOptions(include_audit=True))
    )
    agg.add(parse_flow(flow_dict(verdict="AUDIT", reason=None)))
    (plan,) = agg.plans()
    (rule,) = to_data(rule_records(plan.attribution, "s", 10))
    assert rule["classes"] == {"audit": 1}
    assert rule["samples"][0]["verdict"] == "AUDIT"


def merge(
    existing: dict[str, Any] | None, rules: list[dict[str, Any]], sid: str, **kw: Any
) -> dict[str, Any]:
    doc = merge_evidence(
        from_data(existing, PolicyEvidence) if existing is not None else None,
        name="cpg-cart",
        namespace="shop",
        workload="cart",
        session=session(sid, **{k: v for k, v in kw.items() if k == "started"}),
        rules=from_data(rules, list[RuleEvidence]),
        max_samples=kw.get("max_samples", 10),
        max_sessions=kw.get("max_sessions", 10),
    )
    data: dict[str, Any] = to_data(doc)
    return data


def test_two_runs_add_counts_widen_times_and_keep_unseen_rules() -> None:
    run1 = records(
        flow_dict(time="2026-11-02T10:00:00Z"),
        flow_dict(tcp=443, time="2026-11-02T10:00:01Z"),
        sid="s1",
    )
    run2 = records(
        flow_dict(time="2026-11-01T09:00:00Z"), flow_dict(time="2026-11-03T09:00:00Z"), sid="s2"
    )
    doc = merge(merge(None, run1, "s1"), run2, "s2", started="2026-11-29T11:00:00.000000Z")
    by_port = {r["port"]: r for r in doc["rules"]}
    assert by_port["8080"]["flow_count"] == 3
    assert by_port["8080"]["first_seen"] == "2026-11-01T09:00:00.000000000Z"
    assert by_port["8080"]["last_seen"] == "2026-11-03T09:00:00.000000000Z"
    assert by_port["8080"]["contributing_sessions"] == ["s1", "s2"]
    assert by_port["443"]["flow_count"] == 1, "a rule not seen in run 2 is kept"
    assert by_port["443"]["contributing_sessions"] == ["s1"]
    assert [s["id"] for s in doc["sessions"]] == ["s1", "s2"]
    assert by_port["8080"]["classes"] == {"policy": 3}


def test_same_session_upserts_and_never_duplicates_its_id() -> None:
    run = records(flow_dict(), sid="s1")
    doc = merge(merge(None, run, "s1"), run, "s1")
    assert [s["id"] for s in doc["sessions"]] == ["s1"]
    assert doc["rules"][0]["contributing_sessions"] == ["s1"]
    assert doc["rules"][0]["flow_count"] == 2


def test_caps_drop_the_oldest_sessions_and_samples() -> None:
    doc = None
    for i in range(5):
        run = records(
            flow_dict(src=pod(f"fe-{i}"), time=f"2026-11-02T10:00:0{i}Z", src_ip=f"10.0.0.{i}"),
            sid=f"s{i}",
        )
        doc = merge(
            doc,
            run,
            f"s{i}",
            started=f"2026-11-29T10:00:0{i}.000000Z",
            max_samples=2,
            max_sessions=3,
        )
    assert doc is not None
    assert [s["id"] for s in doc["sessions"]] == ["s2", "s3", "s4"]
    assert [s["src"]["ip"] for s in doc["rules"][0]["samples"]] == ["10.0.0.3", "10.0.0.4"]
    assert doc["rules"][0]["contributing_sessions"] == ["s0", "s1", "s2", "s3", "s4"]


def test_rules_are_sorted_by_direction_then_key() -> None:
    run = records(
        flow_dict(direction="EGRESS", dst=WORLD, dst_ip="8.8.8.8", src=endpoint("shop", "cart")),
        flow_dict(src=endpoint("shop", "frontend"), dst=endpoint("shop", "cart")),
    )
    doc = merge(None, run, "s1")
    assert [(r["direction"], r["key"]) for r in doc["rules"]] == [
        ("egress", "egress:cidr:8.8.8.8/32:TCP:8080"),
        ("egress", "egress:ep:kube-system/k8s-app=kube-dns:TCP:53"),  # DNS, for every egress
        ("egress", "egress:ep:kube-system/k8s-app=kube-dns:UDP:53"),
        ("ingress", "ingress:ep:shop/app=frontend:TCP:8080"),
    ]


def test_other_schema_versions_are_refused_with_the_fix() -> None:
    with pytest.raises(EvidenceError, match=r"schema_version 1.*reads version 2.*rebuild"):
        parse_evidence(json.dumps({"schema_version": 1}), "x.json")
    with pytest.raises(EvidenceError, match="not valid JSON"):
        parse_evidence("{", "x.json")
    doc = from_data(merge(None, records(flow_dict()), "s1"), PolicyEvidence)
    assert parse_evidence(render_evidence(doc), "x.json") == doc


FIXED = [
    "2026-11-29T12:00:00.000000+00:00",
    "2026-11-29T12:00:01.500000+00:00",
    "2026-11-29T12:00:01.600000+00:00",
    "2026-11-29T12:00:01.700000+00:00",
]


def fixed_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes) -> Path:
    from datetime import datetime

    moments = iter(datetime.fromisoformat(t) for t in FIXED)
    monkeypatch.setattr("cpg_io.runs._replay.cpg_version", lambda: "9.9.9-test")
    result = replay_capture(
        ["-"],  # standard input, as a pipe would bring it: read from memory here
        tmp_path / "policies",
        AggregateOptions(),
        engine=in_memory({"-": data}),
        evidence=EvidenceSettings(root=tmp_path / "evidence"),
        clock=lambda: next(moments),
        session_id="2026-11-29T12:00:00Z-test",
    )
    assert result.evidence_dir is not None and not result.evidence_errors
    return result.evidence_dir


def test_evidence_file_bytes_are_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshot: Any
) -> None:
    base = fixed_replay(tmp_path, monkeypatch, EXAMPLE.read_bytes())
    files = {str(p.relative_to(base)): p.read_text() for p in sorted(base.rglob("*.json"))}
    assert sorted(files) == [
        "cluster-health.json",
        "monitoring/blackbox.json",
        "monitoring/prometheus.json",
        "payments/ledger.json",
        "payments/payments-api.json",
        "shop/cart.json",
        "shop/frontend.json",
    ]
    assert files["shop/cart.json"] == snapshot(name="cart-evidence")
    assert files["payments/payments-api.json"] == snapshot(name="payments-api-evidence")
    assert files["cluster-health.json"] == snapshot(name="cluster-health")


def test_explain_json_bytes_are_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshot: Any
) -> None:
    base = fixed_replay(tmp_path, monkeypatch, EXAMPLE.read_bytes())
    doc = parse_evidence((base / "shop" / "cart.json").read_text(), "cart.json")
    assert render_explain_json(doc, ExplainFilter()) == snapshot(name="explain-all")
    assert render_explain_json(
        doc, ExplainFilter(direction="ingress", samples_limit=2)
    ) == snapshot(name="explain-ingress-2-samples")
