from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import WORLD, endpoint, flow_dict
from cpg_core._base.documents import (
    DnsRecord,
    EntityPeerRecord,
    HttpRecord,
    PolicyEvidence,
    PolicyIdentity,
    RuleEvidence,
    SessionInfo,
    SessionSource,
)
from cpg_core._flows.parse import parse_flow
from cpg_core._requests.requests import parse_cidr, parse_duration, parse_peer
from cpg_core._review.evidence import merge_evidence, rule_records
from cpg_core._review.explain import (
    ExplainFilter,
    explain_lines,
    explain_record,
    matched_rules,
    render_explain_json,
)
from cpg_core._review.wire import to_data
from cpg_core._synthesis.aggregate import AggregateOptions, Aggregator
from cpg_core._synthesis.scope import ClusterScope


@pytest.fixture(scope="module")
def doc() -> PolicyEvidence:
    flows = [
        flow_dict(
            src=endpoint("shop", "frontend"),
            dst=endpoint("shop", "cart"),
            tcp=8080,
            time="2026-11-02T10:00:00Z",
        ),
        flow_dict(
            src=endpoint("shop", "frontend"),
            dst=endpoint("shop", "cart"),
            tcp=8443,
            time="2026-11-02T11:00:00Z",
        ),
        flow_dict(
            src=endpoint("pay", "api"),
            dst=endpoint("shop", "cart"),
            tcp=8080,
            time="2026-11-02T12:00:00Z",
        ),
        flow_dict(
            src=endpoint("shop", "cart"),
            dst=WORLD,
            dst_ip="203.0.113.9",
            direction="EGRESS",
            tcp=443,
            time="2026-11-02T09:00:00Z",
        ),
        flow_dict(
            src=endpoint("shop", "cart"),
            dst={"identity": 1, "labels": ["reserved:host"]},
            direction="EGRESS",
            icmp4=8,
            time="",
        ),
    ]
    agg = Aggregator(AggregateOptions(scope=ClusterScope(enabled=False)))  # the capture's rules
    for f in flows:
        agg.add(parse_flow(f))
    (plan,) = agg.plans()
    session = SessionInfo(
        "s1",
        "2026-11-29T10:00:00Z",
        "2026-11-29T10:00:01Z",
        "t",
        SessionSource("replay"),
        flows_ingested=5,
    )
    return merge_evidence(
        None,
        name=plan.name,
        namespace="shop",
        workload="cart",
        session=session,
        rules=rule_records(plan.attribution, "s1", 10),
    )


def keys(doc: PolicyEvidence, **kw: Any) -> list[str]:
    return [r.key for r in matched_rules(doc, ExplainFilter(**kw))]


def test_no_filter_keeps_every_rule_in_file_order(doc: PolicyEvidence) -> None:
    assert keys(doc) == [r.key for r in doc.rules]
    assert len(keys(doc)) == 5


def test_each_filter_alone(doc: PolicyEvidence) -> None:
    assert keys(doc, direction="egress") == [
        "egress:cidr:203.0.113.9/32:TCP:443",
        "egress:entity:host:ICMPv4:8",
    ]
    assert keys(doc, direction="ingress") == [
        "ingress:ep:pay/app=api:TCP:8080",
        "ingress:ep:shop/app=frontend:TCP:8080",
        "ingress:ep:shop/app=frontend:TCP:8443",
    ]
    assert keys(doc, port="8443") == ["ingress:ep:shop/app=frontend:TCP:8443"]
    assert keys(doc, port="8") == ["egress:entity:host:ICMPv4:8"]
    assert keys(doc, peer=("app", "api")) == ["ingress:ep:pay/app=api:TCP:8080"]
    assert keys(doc, peer=("namespace", "pay")) == ["ingress:ep:pay/app=api:TCP:8080"]
    assert keys(doc, peer=("entity", "host")) == ["egress:entity:host:ICMPv4:8"]
    assert keys(doc, peer_cidr="203.0.113.0/24") == ["egress:cidr:203.0.113.9/32:TCP:443"]
    assert keys(doc, peer_cidr="10.0.0.0/8") == []
    assert keys(doc, since="2026-11-02T10:30:00.000000000Z") == [
        "egress:entity:host:ICMPv4:8",  # never seen with a time: kept
        "ingress:ep:pay/app=api:TCP:8080",
        "ingress:ep:shop/app=frontend:TCP:8443",
    ]
    # No rule carries L7 yet, so any L7 filter matches nothing.
    assert keys(doc, http_method="GET") == []
    assert keys(doc, http_path="^/$") == []
    assert keys(doc, dns_pattern="example.com") == []


def test_filters_combine(doc: PolicyEvidence) -> None:
    assert keys(doc, direction="ingress", port="8080", peer=("app", "frontend")) == [
        "ingress:ep:shop/app=frontend:TCP:8080"
    ]
    assert keys(doc, direction="egress", port="8080") == []


def test_l7_filters_match_l7_records() -> None:
    peer = EntityPeerRecord("world")
    doc = PolicyEvidence(
        policy=PolicyIdentity(),
        rules=(
            RuleEvidence("a", "egress", peer, "80", "TCP", l7=HttpRecord("GET", "^/x$")),
            RuleEvidence("b", "egress", peer, "53", "UDP", l7=DnsRecord("api.example.com")),
            RuleEvidence("c", "egress", peer, "80", "TCP"),
        ),
    )
    assert keys(doc, http_method="GET") == ["a"]
    assert keys(doc, http_method="GET", http_path="^/y$") == []
    assert keys(doc, dns_pattern="api.example.com") == ["b"]


def test_samples_limit_keeps_the_newest(doc: PolicyEvidence) -> None:
    record = to_data(explain_record(doc, ExplainFilter(samples_limit=0)))
    assert all(r["samples"] == [] for r in record["matched_rules"])
    assert list(record) == ["policy", "sessions", "matched_rules"]


def test_json_rendering_is_the_record(doc: PolicyEvidence) -> None:
    text = render_explain_json(doc, ExplainFilter(port="443"))
    assert text.endswith("}\n")
    assert json.loads(text) == to_data(explain_record(doc, ExplainFilter(port="443")))


def test_text_lists_available_rules_when_nothing_matches(doc: PolicyEvidence) -> None:
    lines = [text for _, text in explain_lines(doc, ExplainFilter(port="1"))]
    assert "No rule matches these filters. Available rules:" in lines
    assert "  ingress  TCP/8080 from shop/app=frontend" in lines
    assert "  egress  ICMPv4 type 8 to entity host" in lines


def test_text_shows_counts_times_and_samples(doc: PolicyEvidence) -> None:
    lines = [text for _, text in explain_lines(doc, ExplainFilter(port="8443"))]
    assert "Ingress  TCP/8443 from shop/app=frontend" in lines
    assert "  flows:      1 (policy 1)" in lines
    assert "  first seen: 2026-11-02 11:00:00 UTC" in lines
    assert any("shop/frontend 10.0.0.1 → shop/cart 10.0.0.2  TCP/8443" in line for line in lines)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("1h30m", 5400), ("2d", 172800), ("1.5h", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "10", "ten minutes", "5x", "1h 30m"])
def test_bad_durations_name_the_expected_form(bad: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 90s"):
        parse_duration(bad)


def test_bad_peer_and_cidr_name_the_expected_form() -> None:
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_peer("app")
    with pytest.raises(ValueError, match="not a CIDR"):
        parse_cidr("10.0.0.300/8")
    assert parse_peer("app = web") == ("app", "web")
    assert parse_cidr("10.1.2.3/8") == "10.0.0.0/8"
