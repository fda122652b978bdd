"""The project's own Hubble .proto subset: stubs in sync, field numbers honest, and protobuf
flows converted to exactly what the JSON parser gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import json_format

from conftest import CORPUS, EXAMPLE
from cpg_core._flows.parse import parse_record
from cpg_io._proto.flow import flow_pb2
from cpg_io._proto.observer import observer_pb2
from cpg_io._proto.relay import relay_pb2
from cpg_io.hubble_convert import PartialResponse, ProtoConverter

SRC = Path(__file__).resolve().parents[2] / "src"
PROTOS = [
    "cpg_io/_proto/flow/flow.proto",
    "cpg_io/_proto/relay/relay.proto",
    "cpg_io/_proto/observer/observer.proto",
]

# Hubble's numbers (Cilium v1.19 flow.proto, observer.proto, relay.proto), written down here.
EXPECTED = {
    "flow.Flow": {
        "time": 1,
        "uuid": 34,
        "verdict": 2,
        "drop_reason": 3,
        "IP": 5,
        "l4": 6,
        "source": 8,
        "destination": 9,
        "Type": 10,
        "node_name": 11,
        "source_names": 13,
        "destination_names": 14,
        "l7": 15,
        "reply": 16,
        "event_type": 19,
        "traffic_direction": 22,
        "drop_reason_desc": 25,
        "is_reply": 26,
        "egress_allowed_by": 21001,
        "ingress_allowed_by": 21002,
        "egress_denied_by": 21004,
        "ingress_denied_by": 21005,
    },
    "flow.Layer4": {"TCP": 1, "UDP": 2, "ICMPv4": 3, "ICMPv6": 4, "SCTP": 5, "VRRP": 6, "IGMP": 7},
    "flow.Layer7": {"type": 1, "latency_ns": 2, "dns": 100, "http": 101},
    "flow.Endpoint": {
        "ID": 1,
        "identity": 2,
        "cluster_name": 7,
        "namespace": 3,
        "labels": 4,
        "pod_name": 5,
    },
    "flow.TCP": {"source_port": 1, "destination_port": 2, "flags": 3},
    "flow.TCPFlags": {
        "FIN": 1,
        "SYN": 2,
        "RST": 3,
        "PSH": 4,
        "ACK": 5,
        "URG": 6,
        "ECE": 7,
        "CWR": 8,
        "NS": 9,
    },
    "flow.UDP": {"source_port": 1, "destination_port": 2},
    "flow.SCTP": {"source_port": 1, "destination_port": 2},
    "flow.ICMPv4": {"type": 1, "code": 2},
    "flow.ICMPv6": {"type": 1, "code": 2},
    "flow.VRRP": {"type": 1, "vrid": 2, "priority": 3},
    "flow.IGMP": {"type": 1, "group_address": 2},
    "flow.IP": {"source": 1, "destination": 2, "ipVersion": 3},
    "flow.Policy": {"name": 1, "namespace": 2, "labels": 3, "revision": 4, "kind": 5},
    "flow.CiliumEventType": {"type": 1, "sub_type": 2},
    "flow.FlowFilter": {
        "source_pod": 2,
        "destination_pod": 4,
        "verdict": 5,
        "drop_reason_desc": 33,
    },
    "flow.DNS": {
        "query": 1,
        "ips": 2,
        "ttl": 3,
        "cnames": 4,
        "observation_source": 5,
        "rcode": 6,
        "qtypes": 7,
        "rrtypes": 8,
    },
    "flow.HTTP": {"code": 1, "method": 2, "url": 3, "protocol": 4},
    "flow.LostEvent": {"source": 1, "num_events_lost": 2, "cpu": 3},
    "relay.NodeStatusEvent": {"state_change": 1, "node_names": 2, "message": 3},
    "observer.ServerStatusRequest": {},
    "observer.ServerStatusResponse": {
        "num_flows": 1,
        "max_flows": 2,
        "seen_flows": 3,
        "uptime_ns": 4,
        "num_connected_nodes": 5,
        "num_unavailable_nodes": 6,
        "unavailable_nodes": 7,
        "version": 8,
        "flows_rate": 9,
    },
    "observer.GetFlowsRequest": {
        "number": 1,
        "first": 9,
        "follow": 3,
        "blacklist": 5,
        "whitelist": 6,
        "since": 7,
        "until": 8,
        "field_mask": 10,
    },
    "observer.GetFlowsResponse": {
        "flow": 1,
        "node_status": 2,
        "lost_events": 3,
        "node_name": 1000,
        "time": 1001,
    },
    "observer.GetNodesRequest": {},
    "observer.GetNodesResponse": {"nodes": 1},
    "observer.Node": {
        "name": 1,
        "version": 2,
        "address": 3,
        "state": 4,
        "tls": 5,
        "uptime_ns": 6,
        "num_flows": 7,
        "max_flows": 8,
        "seen_flows": 9,
    },
    "observer.TLS": {"enabled": 1, "server_name": 2},
}


def test_every_field_number_is_hubbles() -> None:
    seen = {}
    for module in (flow_pb2, observer_pb2, relay_pb2):
        for message in module.DESCRIPTOR.message_types_by_name.values():
            seen[message.full_name] = {f.name: f.number for f in message.fields}
    assert seen == EXPECTED


def test_enums_are_hubbles() -> None:
    assert {v.name: v.number for v in flow_pb2.Verdict.DESCRIPTOR.values} == {
        "VERDICT_UNKNOWN": 0,
        "FORWARDED": 1,
        "DROPPED": 2,
        "ERROR": 3,
        "AUDIT": 4,
        "REDIRECTED": 5,
        "TRACED": 6,
        "TRANSLATED": 7,
    }
    assert flow_pb2.DropReason.Value("POLICY_DENY") == 181
    assert flow_pb2.DropReason.Value("DROP_PUNT_PROXY") == 205
    assert len(flow_pb2.DropReason.DESCRIPTOR.values) == 76
    assert relay_pb2.NodeState.Value("NODE_ERROR") == 4
    method = observer_pb2.DESCRIPTOR.services_by_name["Observer"].methods_by_name["GetFlows"]
    assert method.full_name == "observer.Observer.GetFlows" and method.server_streaming


def test_committed_stubs_match_the_proto_files(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    for proto in PROTOS:
        (tmp_path / proto).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / proto).write_bytes((SRC / proto).read_bytes())
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            str(tmp_path),
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            *PROTOS,
        ],
        check=True,
        capture_output=True,
    )
    for proto in PROTOS:
        stem = proto.removesuffix(".proto")
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"):
            generated = (tmp_path / (stem + suffix)).read_text()
            committed = (SRC / (stem + suffix)).read_text()
            assert generated == committed, f"{stem + suffix} is stale: run 'make proto'"


def captures() -> list[Path]:
    return [EXAMPLE, *(sorted(CORPUS.glob("*.json*")) if CORPUS.exists() else [])]


@pytest.mark.parametrize("path", captures(), ids=lambda p: p.name)
def test_protobuf_flows_convert_like_json_flows(path: Path) -> None:
    converter = ProtoConverter()
    checked = partials = 0
    for line in path.read_text().splitlines():
        try:
            obj = json.loads(line)
            message = json_format.Parse(
                line, observer_pb2.GetFlowsResponse(), ignore_unknown_fields=True
            )
        except (ValueError, json_format.ParseError):
            continue  # the example's deliberately malformed lines
        assert converter.record(message) == parse_record(obj)
        # the live path decodes a flow partially first (endpoints left encoded): same meaning
        partial = PartialResponse.FromString(message.SerializeToString())
        if partial.WhichOneof("response_types") == "flow":
            assert converter.record(partial) == parse_record(obj)
            assert converter.quick(partial.flow, partial) == converter.quick(message.flow, message)
            partials += 1
        checked += 1
    assert checked > 0 and partials > 0


def test_an_endpoint_present_but_empty_means_the_same_either_way() -> None:
    converter = ProtoConverter()
    message = observer_pb2.GetFlowsResponse()
    message.flow.time.seconds = 1_790_000_000
    message.flow.verdict = 2  # DROPPED
    message.flow.drop_reason_desc = 133  # POLICY_DENIED
    message.flow.traffic_direction = 1
    message.flow.l4.TCP.destination_port = 80
    message.flow.source.SetInParent()  # there, with nothing in it
    message.flow.destination.namespace = "shop"
    partial = PartialResponse.FromString(message.SerializeToString())
    assert converter.record(partial) == converter.record(message)
    assert converter.quick(partial.flow, partial) == converter.quick(message.flow, message)


def test_a_reused_identity_number_never_brings_back_old_labels() -> None:
    """Cilium frees identity numbers and hands them to other label sets (CIDR identities
    above all): the converter must not find an endpoint by its number alone."""
    converter = ProtoConverter()
    seen = []
    for cidr in ("cidr:10.1.0.0/16", "cidr:192.168.0.0/24"):
        record = {
            "flow": {
                "time": "2026-11-02T10:00:00Z",
                "verdict": "DROPPED",
                "drop_reason_desc": "POLICY_DENIED",
                "traffic_direction": "EGRESS",
                "l4": {"TCP": {"destination_port": 443}},
                "source": {"identity": 4001, "namespace": "shop", "labels": ["k8s:app=a"]},
                "destination": {"identity": 16777217, "labels": ["reserved:world", cidr]},
            }
        }
        response = json_format.Parse(json.dumps(record), observer_pb2.GetFlowsResponse())
        quick = converter.quick(response.flow, response)
        flow = converter.flow(response.flow, response)
        assert quick is not None and isinstance(quick[0], tuple)
        entry = converter.entry_key(quick[0])
        assert entry is not None and entry[2] == flow.destination
        seen.append(flow.destination.labels)
    assert seen == [
        ("reserved:world", "cidr:10.1.0.0/16"),
        ("reserved:world", "cidr:192.168.0.0/24"),
    ]


def test_the_tcp_flags_and_the_source_port_arrive_both_ways() -> None:
    line = json.dumps(
        {
            "flow": {
                "verdict": "FORWARDED",
                "l4": {
                    "TCP": {
                        "source_port": 8080,
                        "destination_port": 45678,
                        "flags": {"SYN": True, "ACK": True},
                    }
                },
            }
        }
    )
    message = json_format.Parse(line, observer_pb2.GetFlowsResponse())
    converted = ProtoConverter().record(message)
    parsed = parse_record(json.loads(line))
    assert converted == parsed
    assert parsed.source_port == 8080 and parsed.tcp_flags == ("ACK", "SYN")  # type: ignore[union-attr]


def test_a_live_capture_that_learns_asks_the_relay_for_the_flows_that_work() -> None:
    from cpg_io._proto.flow import flow_pb2
    from cpg_io.hubble import flow_filters

    (plain,) = flow_filters([], include_audit=False)
    assert list(plain.verdict) == [flow_pb2.DROPPED]
    learning = flow_filters(["shop"], include_audit=True, learn=True)
    assert len(learning) == 2  # from or to the namespace's pods
    for one in learning:
        assert set(one.verdict) == {
            flow_pb2.DROPPED,
            flow_pb2.AUDIT,
            flow_pb2.FORWARDED,
            flow_pb2.REDIRECTED,
        }
