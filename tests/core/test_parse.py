from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from conftest import endpoint, flow_dict
from cpg_core._base.dropreasons import UNRECOGNISED_REASON
from cpg_core._base.errors import FlowParseError
from cpg_core._base.flow import Flow, LostEvents, OtherRecord
from cpg_core._flows.parse import FlowParser, parse_flow, parse_record


def test_wrapped_snake_case_flow() -> None:
    record = flow_dict(endpoint("shop", "frontend"), endpoint("shop", "cart"), tcp=8080)
    record["flow"]["node_name"] = "worker-1"
    flow = parse_flow(record)
    assert flow.verdict == 2
    assert flow.drop_reason == 133
    assert flow.direction == 1
    assert flow.protocol == "TCP" and flow.port == 8080
    assert flow.source.namespace == "shop"
    assert flow.destination.labels == ("k8s:app=cart", "k8s:io.kubernetes.pod.namespace=shop")
    assert flow.is_reply is False
    assert flow.node_name == "worker-1"
    assert flow.time == "2026-11-02T10:00:00Z"


def test_bare_flow_equals_wrapped_flow() -> None:
    record = flow_dict()
    assert parse_flow(record["flow"]) == parse_flow(record)


def test_lower_camel_case_keys_give_the_same_flow() -> None:
    snake = {
        "flow": {
            "verdict": "DROPPED",
            "drop_reason_desc": "POLICY_DENIED",
            "traffic_direction": "EGRESS",
            "is_reply": False,
            "node_name": "n1",
            "l4": {"UDP": {"source_port": 1, "destination_port": 53}},
            "source": {
                "namespace": "a",
                "labels": ["k8s:app=x"],
                "pod_name": "x-1",
                "cluster_name": "c",
            },
            "destination_names": ["api.example.com"],
            "egress_denied_by": [{"name": "deny", "namespace": "a"}],
        }
    }
    camel = {
        "flow": {
            "verdict": "DROPPED",
            "dropReasonDesc": "POLICY_DENIED",
            "trafficDirection": "EGRESS",
            "isReply": False,
            "nodeName": "n1",
            "l4": {"UDP": {"sourcePort": 1, "destinationPort": 53}},
            "source": {
                "namespace": "a",
                "labels": ["k8s:app=x"],
                "podName": "x-1",
                "clusterName": "c",
            },
            "destinationNames": ["api.example.com"],
            "egressDeniedBy": [{"name": "deny", "namespace": "a"}],
        }
    }
    assert parse_flow(camel) == parse_flow(snake)
    assert parse_flow(camel).port == 53


def test_enum_numbers_equal_enum_names() -> None:
    by_name = flow_dict(verdict="DROPPED", reason="POLICY_DENY", direction="EGRESS")
    by_number = flow_dict()
    by_number["flow"].update(verdict=2, drop_reason_desc=181, traffic_direction=2)
    assert parse_flow(by_number) == parse_flow(by_name)


def test_uint64_strings_and_unknown_fields_are_accepted() -> None:
    record = flow_dict()
    record["flow"]["socket_cookie"] = "18446744073709551615"
    record["flow"]["some_future_field"] = {"nested": [1, 2]}
    record["flow"]["l7"] = {
        "type": "REQUEST",
        "latency_ns": "999",
        "http": {"method": "GET", "url": "/x", "code": 200},
    }
    record["extra_top_level"] = True
    flow = parse_flow(record)
    assert flow.l7 is not None and flow.l7.http is not None and flow.l7.http.method == "GET"


def test_unknown_reason_name_uses_the_numeric_fallbacks() -> None:
    with_number = flow_dict(reason="SOME_FUTURE_REASON", drop_reason=251)
    assert parse_flow(with_number).drop_reason == 251
    assert parse_flow(with_number).drop_reason_text == "SOME_FUTURE_REASON"
    with_event = flow_dict(reason="SOME_FUTURE_REASON", event_type={"type": 1, "sub_type": 252})
    assert parse_flow(with_event).drop_reason == 252
    bare = flow_dict(reason="SOME_FUTURE_REASON")
    assert parse_flow(bare).drop_reason == UNRECOGNISED_REASON


def test_deprecated_numeric_reason_is_read_when_desc_is_absent() -> None:
    record = flow_dict(reason=None, drop_reason=181)
    assert parse_flow(record).drop_reason == 181


def test_deprecated_reply_flag_is_a_fallback() -> None:
    record = flow_dict(reply=None, reply_flag=None)
    record["flow"]["reply"] = True
    assert parse_flow(record).is_reply is True
    assert parse_flow(flow_dict(reply=None)).is_reply is None


def test_lost_events_and_other_records() -> None:
    lost = parse_record({"lost_events": {"source": "HUBBLE_RING_BUFFER", "num_events_lost": "7"}})
    assert lost == LostEvents(count=7, source="HUBBLE_RING_BUFFER")
    assert isinstance(
        parse_record({"node_status": {"state_change": "NODE_CONNECTED"}}), OtherRecord
    )


def test_time_falls_back_to_the_response_time() -> None:
    record = flow_dict()
    del record["flow"]["time"]
    record["time"] = "2026-01-01T00:00:00Z"
    assert parse_flow(record).time == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "expected a JSON object"),
        ("text", "expected a JSON object"),
        ({}, "not a Hubble flow record"),
        ({"flow": "x"}, "'flow' must be an object"),
        (
            {"flow": {"verdict": "DROPPED", "source": {"labels": "k8s:app=x"}}},
            "'source.labels' must be a list",
        ),
        (
            {"flow": {"verdict": "DROPPED", "source": {"labels": [1]}}},
            "'source.labels[]' must be a string",
        ),
        (
            {"flow": {"verdict": "DROPPED", "source": {"namespace": 5}}},
            "'source.namespace' must be a string",
        ),
        (
            {"flow": {"verdict": "DROPPED", "l4": {"TCP": {"destination_port": "http"}}}},
            "must be an integer",
        ),
        ({"flow": {"verdict": "DROPPED", "l4": ["TCP"]}}, "'l4' must be an object"),
        ({"flow": {"verdict": [2]}}, "'verdict' must be an enum"),
        ({"flow": {"verdict": "DROPPED", "is_reply": "yes"}}, "'is_reply' must be a boolean"),
        ({"flow": {"verdict": "DROPPED", "time": 17}}, "'time' must be a string"),
        ({"flow": {"verdict": "DROPPED", "IP": {"source": 10}}}, "'IP.source' must be a string"),
        ({"flow": {"verdict": "DROPPED", "source": {"namespace": ["a"]}}}, "must be a string"),
    ],
)
def test_bad_input_raises_one_error_that_names_the_problem(value: Any, message: str) -> None:
    with pytest.raises(FlowParseError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_record(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
flow_keys = st.sampled_from(
    [
        "verdict",
        "source",
        "destination",
        "IP",
        "l4",
        "l7",
        "traffic_direction",
        "is_reply",
        "drop_reason_desc",
        "drop_reason",
        "time",
        "node_name",
        "egress_denied_by",
        "event_type",
        "destination_names",
        "trafficDirection",
        "uuid",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(flow_keys, json_values, max_size=8))
def test_any_json_either_parses_or_raises_flow_parse_error(body: dict[str, Any]) -> None:
    parser = FlowParser()
    for value in ({"flow": body}, body):
        try:
            result = parser.parse(json.loads(json.dumps(value)))
        except FlowParseError:
            continue
        assert isinstance(result, Flow | LostEvents | OtherRecord)


def test_a_null_where_a_string_belongs_is_an_absent_field() -> None:
    """Two flows of one pod pair at the same time, one with a null uuid and a null source IP:
    the run goes on and both count (a null used to reach the attribution's sort)."""
    from conftest import flow_dict, jsonl
    from cpg_core import generate

    plain = flow_dict(uuid="a-uuid")
    odd = flow_dict(uuid=None)
    odd["flow"]["IP"] = {"source": None, "destination": "10.0.0.2"}
    odd["flow"]["node_name"] = None
    result = generate(jsonl([plain, odd, plain]).splitlines())
    assert result.stats.malformed == 0
    (evidence,) = result.evidence.values()
    assert sum(rule.flow_count for rule in evidence.rules) == 3
    flow = parse_flow(odd)
    assert (flow.uuid, flow.source_ip, flow.node_name) == ("", "", "")
