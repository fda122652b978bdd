"""The words of traffic the review use cases share: a kind of traffic and its line, the flows
the matcher cannot tell apart, what a judge keeps of a stream, and the policies by namespace."""

from __future__ import annotations

from collections.abc import Sequence, Sized
from typing import Any

import attrs

from cpg_core._base.documents import (
    PolicyDocument,
)
from cpg_core._base.flow import Direction, Endpoint, Flow, Verdict
from cpg_core._flows.synthesis import (
    endpoint_kind,
    endpoint_name,
    mesh_flow,
    note_pod,
)
from cpg_core._policy.matcher import (
    note_dns_names,
    policy_name,
    selecting_specs,
)
from cpg_core._policy.policy_set import PolicySet
from cpg_core._policy.tiers import is_cluster_network_policy
from cpg_core._review.plan_documents import Traffic


def traffic_line(flow: Flow) -> str:
    """``ingress src → dst PROTO/port``, naming a world peer by its IP."""

    mesh = mesh_flow(flow)

    def name(endpoint: Endpoint, ip: str) -> str:
        if ip and endpoint_kind(endpoint).world:
            return ip
        return f"{endpoint.cluster_name}/" * mesh + endpoint_name(endpoint)

    way = WAYS.get(flow.direction, "?")
    traffic = f"{flow.protocol}/{flow.port}" if flow.protocol else "no-L4"
    return (
        f"{way:<7} {name(flow.source, flow.source_ip)} → "
        f"{name(flow.destination, flow.destination_ip)} {traffic}"
    )


WAYS = {int(Direction.INGRESS): "ingress", int(Direction.EGRESS): "egress"}
"""A flow's direction as the review documents spell it."""


WORKS = frozenset({int(Verdict.FORWARDED), int(Verdict.REDIRECTED)})


@attrs.define
class FlowGroup:
    first: Flow
    flows: int = 0


CACHE_LIMIT = 65536
"""Entries a judge's caches hold before they start again (a stream of new endpoints cannot
grow them without bound; what they hold is computed again on demand)."""


class Worlds(dict[Endpoint, bool]):
    """Whether an endpoint is the world, asked once per endpoint."""

    def __missing__(self, endpoint: Endpoint) -> bool:
        if len(self) >= CACHE_LIMIT:
            self.clear()
        found = self[endpoint] = endpoint_kind(endpoint).world
        return found


class Kept:
    """What a judge keeps of a stream, under a cap (0: none) on the kinds of traffic and on
    the pods, names and endpoints noted beside them: a stream sending something new in every
    flow cannot grow a judge without bound. Flows past the cap are counted, not judged."""

    __slots__ = ("cap", "unjudged")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.unjudged = 0
        """Flows of kinds of traffic first seen once the cap was reached."""

    def room(self, held: Sized) -> bool:
        """Whether ``held`` may take one more entry."""
        return not self.cap or len(held) < self.cap

    def note_pod(self, pods: dict[str, Endpoint], endpoint: Endpoint, ip: str) -> None:
        if ip in pods or self.room(pods):
            note_pod(pods, endpoint, ip)

    def note_names(self, names: dict[str, list[str]], flow: Flow) -> None:
        if self.room(names):
            note_dns_names(names, flow)


def group_key(flow: Flow, world: Worlds) -> tuple[Any, ...]:
    """Flows the matcher cannot tell apart: same ends, port and L7 request."""
    l7 = flow.l7
    request: tuple[str, ...] = ()
    if l7 is not None and l7.http is not None:
        request = ("http", l7.http.method, l7.http.url)
    elif l7 is not None and l7.dns is not None:
        request = ("dns", l7.dns.query)
    src_ip = flow.source_ip if world[flow.source] else ""
    dst_ip = flow.destination_ip if world[flow.destination] else ""
    return (
        flow.direction,
        flow.source,
        flow.destination,
        src_ip,
        dst_ip,
        flow.protocol,
        flow.port,
        request,
    )


class PolicyIndex(PolicySet):
    """Policies by namespace (a namespaced policy selects only its own namespace's pods),
    with each endpoint's selecting specs and enforcing policies kept."""

    def __init__(self, policies: Sequence[PolicyDocument], host_firewall: bool = False) -> None:
        super().__init__(policies)
        self.host_firewall = host_firewall
        """Host policies select the node (the agents run the host firewall)."""
        self.all = list(policies)
        self.tiered = [p for p in self.all if is_cluster_network_policy(p)]
        """The ClusterNetworkPolicies: they judge every flow, around the others (§D42)."""
        self._enforcing: dict[tuple[Endpoint, str], list[str]] = {}

    def selecting(self, endpoint: Endpoint) -> list[Any]:
        return selecting_specs(self, endpoint, host_firewall=self.host_firewall)

    def enforcing(self, endpoint: Endpoint, direction: str) -> list[str]:
        """Names of the policies that put ``endpoint`` into default-deny for ``direction``
        (kept per endpoint: the caller does not change the list)."""
        key = (endpoint, direction)
        found = self._enforcing.get(key)
        if found is None:
            if len(self._enforcing) >= CACHE_LIMIT:
                self._enforcing.clear()
            found = self._enforcing[key] = sorted(
                {
                    policy_name(p)
                    for p, spec, _ in self.selecting(endpoint)
                    if spec.enforces(direction)
                }
            )
        return found


def who(endpoint: Endpoint) -> str:
    """An endpoint as a plan names it: its workload, and its pod when known."""
    name = endpoint_name(endpoint)
    return f"{name} (pod {endpoint.pod_name})" if endpoint.pod_name else name


def traffic_of(flow: Flow, count: int) -> Traffic:
    line = traffic_line(flow)
    return Traffic(
        direction=WAYS.get(flow.direction, "?"),
        source=endpoint_name(flow.source),
        destination=endpoint_name(flow.destination),
        protocol=flow.protocol,
        port=flow.port,
        flows=count,
        sample=f"{line.split(None, 1)[1]} at {flow.time}" if flow.time else line.split(None, 1)[1],
    )
