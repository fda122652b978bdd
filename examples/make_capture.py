"""Regenerate examples/drops.jsonl, the example capture cpg's quick start replays.

The flows are written by this project in the shape ``hubble observe -o jsonpb`` prints. They
cover every decision cpg makes: candidates in four namespaces (pod, world IPv4/IPv6, entity,
ICMP, UDP, SCTP peers), replies, forwarded traffic, infrastructure, transient and noise drops,
an explicit deny, auth-required and LB source-range drops, endpoints with no stable labels, an
AUDIT flow, a lost-events record and two malformed lines.

    python examples/make_capture.py > examples/drops.jsonl
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta

START = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
NODES = ("worker-a", "worker-b", "worker-c")


def ep(ns: str, app: str, pod: str, identity: int, **extra: str) -> dict[str, object]:
    labels = [
        f"k8s:app={app}",
        f"k8s:io.kubernetes.pod.namespace={ns}",
        f"k8s:io.cilium.k8s.policy.serviceaccount={app}",
        "k8s:pod-template-hash=7d9f8c6b5",
    ]
    labels += [f"k8s:{k.replace('_', '-')}={v}" for k, v in extra.items()]
    return {
        "ID": identity % 4000,
        "identity": identity,
        "namespace": ns,
        "labels": sorted(labels),
        "pod_name": pod,
    }


FRONTEND = ep("shop", "frontend", "frontend-6d8f9c7b5-x2k4p", 20101)
CART = ep("shop", "cart", "cart-5c7d8b9f6-q8w2e", 20102)
SHOP_WORKER = ep("shop", "worker", "worker-7b8c9d6f5-a1b2c", 20103)
PAY_API = ep("payments", "payments-api", "payments-api-84f7b6c9d-m3n4b", 20201)
PAY_WORKER = ep("payments", "worker", "worker-66b8d7c9f-z9y8x", 20202)
LEDGER = ep("payments", "ledger", "ledger-0", 20203)
PROM = ep("monitoring", "prometheus", "prometheus-0", 20301)
BLACKBOX = ep("monitoring", "blackbox", "blackbox-5f6d7c8b9-r5t6y", 20302)
COREDNS = {
    "ID": 411,
    "identity": 20401,
    "namespace": "kube-system",
    "labels": ["k8s:io.kubernetes.pod.namespace=kube-system", "k8s:k8s-app=kube-dns"],
    "pod_name": "coredns-5d78c9869d-8xk2m",
}
WORLD = {"identity": 2, "labels": ["reserved:world"]}
WORLD6 = {"identity": 10, "labels": ["reserved:world-ipv6"]}
HOST = {"identity": 1, "labels": ["reserved:host"]}
APISERVER = {"identity": 7, "labels": ["reserved:kube-apiserver", "reserved:world"]}
REMOTE_NODE = {"identity": 6, "labels": ["reserved:remote-node"]}
NO_LABELS = {"ID": 977, "identity": 30999, "namespace": "shop", "pod_name": "debug-shell"}
HASH_ONLY = {
    "ID": 978,
    "identity": 30998,
    "namespace": "payments",
    "labels": ["k8s:io.kubernetes.pod.namespace=payments", "k8s:pod-template-hash=55d9f"],
    "pod_name": "scratch-55d9f-abcde",
}
IPS = {
    "frontend": "10.0.1.11",
    "cart": "10.0.1.12",
    "worker": "10.0.1.13",
    "payments-api": "10.0.2.21",
    "ledger": "10.0.2.23",
    "prometheus": "10.0.3.31",
    "blackbox": "10.0.3.32",
    "kube-dns": "10.0.4.41",
}

lines: list[str] = []
tick = 0


def ip_of(endpoint: dict[str, object], fallback: str) -> str:
    for label in endpoint.get("labels", []):  # type: ignore[attr-defined]
        for app, ip in IPS.items():
            if label in (f"k8s:app={app}", f"k8s:k8s-app={app}"):
                return ip
    return fallback


def flow(
    src: dict[str, object],
    dst: dict[str, object],
    direction: str,
    l4: dict[str, object],
    verdict: str = "DROPPED",
    reason: str | None = "POLICY_DENIED",
    reply: bool = False,
    src_ip: str | None = None,
    dst_ip: str | None = None,
    **extra: object,
) -> None:
    global tick
    tick += 1
    when = (START + timedelta(seconds=7 * tick, microseconds=1371 * tick)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )
    node = NODES[tick % len(NODES)]
    body: dict[str, object] = {
        "time": when,
        "uuid": f"5f0c{tick:04x}-8d1e-4c52-9a0b-2c6e1f{tick:06x}",
        "verdict": verdict,
    }
    if reason and verdict == "DROPPED":
        body["drop_reason"] = {"POLICY_DENIED": 133, "POLICY_DENY": 181}.get(reason, 0)
    body["IP"] = {
        "source": ip_of(src, "10.0.9.9") if src_ip is None else src_ip,
        "destination": ip_of(dst, "10.0.9.8") if dst_ip is None else dst_ip,
        "ipVersion": "IPv6" if ":" in (dst_ip or src_ip or "") else "IPv4",
    }
    body["l4"] = l4
    body["source"] = src
    body["destination"] = dst
    body["Type"] = "L3_L4"
    body["node_name"] = node
    body["event_type"] = {"type": 1, "sub_type": 133} if verdict == "DROPPED" else {"type": 4}
    body["traffic_direction"] = direction
    body.update(extra)
    if reason and verdict == "DROPPED":
        body["drop_reason_desc"] = reason
    body["is_reply"] = reply
    body["Summary"] = "TCP Flags: SYN" if "TCP" in l4 else next(iter(l4))
    lines.append(json.dumps({"flow": body, "node_name": node, "time": when}, separators=(",", ":")))


def tcp(port: int, sport: int = 40000) -> dict[str, object]:
    return {"TCP": {"source_port": sport, "destination_port": port, "flags": {"SYN": True}}}


def udp(port: int) -> dict[str, object]:
    return {"UDP": {"source_port": 53000, "destination_port": port}}


# --- candidates: missing allow rules -------------------------------------------------------
for i in range(4):
    flow(FRONTEND, CART, "INGRESS", tcp(8080, 41000 + i))  # shop/cart ingress
flow(FRONTEND, CART, "INGRESS", tcp(8443))
flow(CART, PAY_API, "EGRESS", tcp(8443))  # shop/cart egress, cross-ns
flow(CART, PAY_API, "INGRESS", tcp(8443))  # payments-api ingress from shop
flow(CART, COREDNS, "EGRESS", udp(53))
flow(CART, COREDNS, "EGRESS", tcp(53))
flow(SHOP_WORKER, LEDGER, "INGRESS", tcp(5432))  # same labels, two namespaces
flow(PAY_WORKER, LEDGER, "INGRESS", tcp(5432))
flow(PAY_API, WORLD, "EGRESS", tcp(443), dst_ip="203.0.113.10")  # world IPv4 -> /32
flow(PAY_API, WORLD, "EGRESS", tcp(443), dst_ip="203.0.113.11")
flow(PAY_API, WORLD6, "EGRESS", tcp(443), dst_ip="2001:db8:4::10")  # world IPv6 -> /128
flow(PAY_API, COREDNS, "EGRESS", udp(53))
flow(PROM, APISERVER, "EGRESS", tcp(6443), dst_ip="172.18.0.2")  # entity kube-apiserver
flow(HOST, PROM, "INGRESS", tcp(9090), src_ip="10.0.0.1")  # entity host
flow(REMOTE_NODE, PROM, "INGRESS", tcp(9090), src_ip="10.0.0.2")  # entity remote-node
for port in (9100, 8080, 9187):
    flow(PROM, FRONTEND if port == 8080 else LEDGER, "EGRESS", tcp(port))
flow(BLACKBOX, FRONTEND, "EGRESS", {"ICMPv4": {"type": 8}})  # ICMP echo
flow(BLACKBOX, FRONTEND, "INGRESS", {"ICMPv4": {"type": 8}})
flow(BLACKBOX, PAY_API, "EGRESS", {"ICMPv6": {"type": 128}}, src_ip="fd00::32", dst_ip="fd00::21")
flow(LEDGER, PAY_WORKER, "EGRESS", {"SCTP": {"source_port": 3868, "destination_port": 3868}})
flow(FRONTEND, CART, "INGRESS", tcp(8080), reason=None)  # no reason given: still a candidate
for i in range(3):
    flow(CART, PAY_API, "EGRESS", tcp(8443, 42000 + i))  # repeats collapse into one rule
flow(
    FRONTEND, CART, "INGRESS", tcp(9090), verdict="AUDIT", reason=None
)  # only with --include-audit

# --- candidates that cannot become a precise rule -------------------------------------------
flow(NO_LABELS, CART, "INGRESS", tcp(8080))  # peer without stable labels
flow(FRONTEND, HASH_ONLY, "INGRESS", tcp(8080))  # target without stable labels
flow(PAY_API, {"identity": 2, "labels": ["reserved:world"]}, "EGRESS", tcp(443), dst_ip="")  # no IP
flow(FRONTEND, CART, "INGRESS", {"UDP": {"source_port": 5353}})  # port 0 would allow every port
flow(FRONTEND, CART, "TRAFFIC_DIRECTION_UNKNOWN", tcp(8080))

# --- replies: never open the reverse direction ----------------------------------------------
for i in range(3):
    flow(CART, FRONTEND, "EGRESS", tcp(41000 + i, 8080), reply=True)

# --- not a drop: context only ----------------------------------------------------------------
for i in range(6):
    flow(FRONTEND, CART, "INGRESS", tcp(8080), verdict="FORWARDED", reason=None)
flow(CART, PAY_API, "EGRESS", tcp(8443), verdict="TRACED", reason=None)
flow(PAY_API, COREDNS, "EGRESS", udp(53), verdict="REDIRECTED", reason=None)

# --- infrastructure, transient and noise drops: never rules ----------------------------------
for i in range(4):
    flow(CART, PAY_API, "EGRESS", tcp(8443), reason="CT_MAP_INSERTION_FAILED")
for i in range(2):
    flow(FRONTEND, CART, "EGRESS", tcp(8080), reason="SERVICE_BACKEND_NOT_FOUND")
flow(PROM, LEDGER, "EGRESS", tcp(9187), reason="FIB_LOOKUP_FAILED")
for i in range(3):
    flow(LEDGER, PAY_API, "INGRESS", tcp(8443), reason="DROP_EP_NOT_READY")
flow(FRONTEND, CART, "INGRESS", tcp(8080), reason="INVALID_IDENTITY")
flow(CART, PAY_API, "EGRESS", tcp(8443), reason="STALE_OR_UNROUTABLE_IP")
flow(FRONTEND, CART, "EGRESS", tcp(8080), reason="IS_A_CLUSTERIP")
flow(BLACKBOX, HOST, "EGRESS", {"IGMP": {"type": 22}}, reason="IGMP_HANDLED", dst_ip="224.0.0.22")

# --- findings: denied on purpose, not by a missing rule --------------------------------------
deny = [
    {
        "name": "deny-shop-to-ledger",
        "namespace": "payments",
        "labels": [
            "k8s:io.cilium.k8s.policy.name=deny-shop-to-ledger",
            "k8s:io.cilium.k8s.policy.namespace=payments",
        ],
        "revision": "7",
        "kind": "CiliumNetworkPolicy",
    }
]
for i in range(2):
    flow(CART, LEDGER, "INGRESS", tcp(5432), reason="POLICY_DENY", ingress_denied_by=deny)
flow(FRONTEND, PAY_API, "EGRESS", tcp(8443), reason="AUTH_REQUIRED")
flow(
    WORLD,
    FRONTEND,
    "INGRESS",
    tcp(443),
    reason="DENIED_BY_LB_SRC_RANGE_CHECK",
    src_ip="198.51.100.7",
)

lines.insert(
    20,
    '{"lost_events":{"source":"HUBBLE_RING_BUFFER","num_events_lost":"3"},'
    '"node_name":"worker-b","time":"2026-11-02T09:33:00Z"}',
)
lines.insert(31, "this line is not JSON: a capture interrupted mid-write")
lines.insert(45, '{"flow":{"verdict":"DROPPED","source":{"labels":"k8s:app=oops"}}}')

sys.stdout.write("\n".join(lines) + "\n")
