"""cpg why/trace and cpg verify answer with one matcher: on every flow of the real captures
(and the example shipped with cpg), replayed as a default-deny cluster would have seen them,
the answer for the policies cpg writes agrees with verify's; probes on another port, another
pod and another namespace are denied, and both say so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from conftest import CORPUS, EXAMPLE
from cpg_core._base.errors import CpgError
from cpg_core._base.flow import Direction, Endpoint, Flow, Verdict
from cpg_core._base.labels import stable_labels
from cpg_core._flows.decide import Decision, decide
from cpg_core._flows.parse import FlowParser
from cpg_core._policy.matcher import match_flow
from cpg_core._review.why import explain_denial, traced_flows
from cpg_core._synthesis.aggregate import Aggregator
from cpg_core._synthesis.render import render_policy

CAPTURES = [EXAMPLE, *(sorted(CORPUS.glob("*.json*")) if CORPUS.exists() else [])]


def _denied(path: Path) -> list[Flow]:
    """Every flow, with forwarded non-replies turned into policy drops (default deny)."""
    parser, flows = FlowParser(), []
    for line in path.read_text().splitlines():
        try:
            flow = parser.parse(json.loads(line))
        except (ValueError, CpgError):
            continue  # the example has malformed lines on purpose
        if not isinstance(flow, Flow):
            continue
        if flow.verdict == int(Verdict.FORWARDED) and flow.is_reply is not True:
            flow = attrs.evolve(flow, verdict=int(Verdict.DROPPED), drop_reason=133)
        flows.append(flow)
    return flows


def _policies(flows: list[Flow]) -> list[dict[str, Any]]:
    agg = Aggregator()
    for flow in flows:
        agg.add(flow)
    return [
        yaml.safe_load(render_policy(p.name, p.namespace, p.target.selector, p.rules))
        for p in agg.plans()
    ]


def _subject(flow: Flow) -> Endpoint:
    return flow.destination if flow.direction == Direction.INGRESS else flow.source


def _probes(flow: Flow) -> list[Flow]:
    """The same flow on another port, from or to another pod, in another namespace."""
    peer_is_source = flow.direction == Direction.INGRESS
    peer = flow.source if peer_is_source else flow.destination
    other_pod = attrs.evolve(peer, labels=(*peer.labels, "k8s:cpg-probe=elsewhere"), pod_name="x")
    other_pod = attrs.evolve(
        other_pod,
        labels=tuple(
            f"k8s:app={v}-probe" if t.startswith("k8s:app=") else t
            for t in other_pod.labels
            for v in [t.partition("=")[2]]
        ),
    )
    moved = attrs.evolve(
        peer,
        namespace="cpg-probe-ns",
        labels=tuple(
            "k8s:io.kubernetes.pod.namespace=cpg-probe-ns"
            if t.startswith("k8s:io.kubernetes.pod.namespace=")
            else t
            for t in peer.labels
        ),
    )
    probes = [attrs.evolve(flow, port=flow.port + 1 if flow.port < 65535 else 1)]
    for changed in (other_pod, moved):
        probes.append(
            attrs.evolve(flow, source=changed)
            if peer_is_source
            else attrs.evolve(flow, destination=changed)
        )
    return probes


def _spec(endpoint: Endpoint) -> str | None:
    """``NS:k=v,…`` for cpg trace, when the endpoint's labels can be written so."""
    labels = stable_labels(endpoint.labels)
    if not endpoint.namespace or not labels:
        return None
    if any(c in k + v for k, v in labels.items() for c in ",=:@\n"):
        return None
    return endpoint.namespace + ":" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_why_and_trace_agree_with_verify_on_every_flow(path: Path) -> None:
    flows = _denied(path)
    policies = _policies(flows)
    checked = denied_probes = traced = 0
    for flow in flows:
        if decide(flow) is not Decision.CANDIDATE:
            continue
        answer = explain_denial(flow, policies)
        verdict = match_flow(policies, flow)
        if answer.policed_by:
            assert answer.allowed == verdict.allowed, (answer.traffic, verdict.reason)
        if not answer.allowed:
            continue  # a flow cpg can express no rule for (a finding): nothing to probe
        checked += 1
        for probe in _probes(flow):
            probed = explain_denial(probe, policies)
            assert probed.allowed == (match_flow(policies, probe).allowed or not probed.policed_by)
            if probed.policed_by and not probed.allowed:
                denied_probes += 1
                assert probed.near_misses or probed.deny, probed.traffic
        source, destination = _spec(flow.source), _spec(flow.destination)
        if source and destination and flow.protocol in ("TCP", "UDP", "SCTP"):
            for traced_flow in traced_flows(source, destination, f"{flow.port}/{flow.protocol}"):
                if traced_flow.direction != flow.direction:
                    continue
                mirror = explain_denial(traced_flow, policies)
                assert (
                    mirror.allowed == match_flow(policies, traced_flow).allowed
                    or not mirror.policed_by
                )
                traced += 1
    if policies:
        assert checked, "the capture had flows cpg wrote rules for"
        assert denied_probes, "some probe must be denied"
    if path == EXAMPLE:
        assert checked > 5 and traced > 5, (checked, traced)
