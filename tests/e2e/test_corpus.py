"""Real Hubble captures (../shared/corpus): every line parses, and the same flows, replayed as
if they had been denied, give CRD-valid policies with stable selectors only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import CORPUS, assert_crd_valid
from cpg_core._base.flow import Flow
from cpg_core._flows.decide import Decision
from cpg_core._flows.parse import FlowParser
from cpg_core._synthesis.aggregate import Aggregator
from cpg_core._synthesis.render import render_policy

FILES = sorted(CORPUS.glob("*.json*")) if CORPUS.exists() else []
pytestmark = pytest.mark.skipif(not FILES, reason="../shared/corpus is absent")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_real_capture_as_denied_traffic(path: Path) -> None:
    parser = FlowParser()
    agg = Aggregator()
    flows = 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        assert isinstance(parser.parse(record), Flow)
        record["flow"]["verdict"] = "DROPPED"
        record["flow"]["drop_reason_desc"] = "POLICY_DENIED"
        flow = parser.parse(record)
        assert isinstance(flow, Flow)
        flows += 1
        agg.add(flow)
    assert agg.total_flows == flows
    assert agg.decisions[Decision.NOT_A_DROP] == 0
    for plan in agg.plans():
        text = render_policy(plan.name, plan.namespace, plan.target.selector, plan.rules)
        assert_crd_valid(text)
        assert "pod-template-hash" not in text and "io.cilium.k8s" not in text
        doc = yaml.safe_load(text)
        for section in ("ingress", "egress"):
            for rule in doc["spec"].get(section, []):
                for selector in rule.get("fromEndpoints", []) + rule.get("toEndpoints", []):
                    assert selector["matchLabels"], "never an empty selector from a flow"


def _default_deny_simulation(path: Path, into: Path) -> Path:
    """The capture as a default-deny cluster would have seen it: every FORWARDED flow that
    is not a reply becomes a POLICY_DENIED drop; everything else stays as it was."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        flow = record.get("flow", record)
        if flow.get("verdict") == "FORWARDED" and not flow.get("is_reply"):
            flow["verdict"] = "DROPPED"
            flow["drop_reason_desc"] = "POLICY_DENIED"
        lines.append(json.dumps(record))
    simulated = into / path.name
    simulated.write_text("\n".join(lines) + "\n")
    return simulated


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_default_deny_simulation_is_fully_admitted(path: Path, tmp_path: Path) -> None:
    from conftest import cpg
    from cpg_core._base.labels import select_labels

    simulated = _default_deny_simulation(path, tmp_path)
    # No peer with stable labels and a namespace label is called unselectable (Hubble gives
    # remote endpoints only their labels: the namespace comes from io.kubernetes.pod.namespace).
    parser, agg = FlowParser(), Aggregator()
    for line in simulated.read_text().splitlines():
        flow = parser.parse(json.loads(line))
        assert isinstance(flow, Flow)
        agg.add(flow)
    for (kind, subject, _), tally in agg.findings.items():
        if kind != "unselectable":
            continue
        for flow in tally.examples:
            for side in (flow.source, flow.destination):
                has_namespace_label = any(
                    label.startswith("k8s:io.kubernetes.pod.namespace=") for label in side.labels
                )
                assert not (has_namespace_label and select_labels(side.labels)), subject
    out = tmp_path / "policies"
    replayed = cpg("replay", str(simulated), "-d", str(out), "--no-evidence")
    assert replayed.returncode == 0, replayed.stderr
    checked = cpg("verify", str(simulated), "-d", str(out), "-o", "json")
    report = json.loads(checked.stdout)
    assert report["candidates"]["admitted"] == report["candidates"]["total"], report
    # nothing denied to check is "cannot judge", never a pass that checked nothing
    judged = report["checks"] or report["system_namespaces"]
    assert report["verdict"] == ("passed" if judged else "cannot_judge"), report


def test_the_corpus_peers_that_had_only_labels_now_get_rules(tmp_path: Path) -> None:
    """The bookinfo capture gives reviews/ratings/productpage peers labels but no namespace."""
    path = CORPUS / "hubble-otel__basic-sample-400-tcp-flows.json"
    if not path.exists():
        pytest.skip("../shared/corpus is absent")
    simulated = _default_deny_simulation(path, tmp_path)
    parser, agg = FlowParser(), Aggregator()
    for line in simulated.read_text().splitlines():
        flow = parser.parse(json.loads(line))
        assert isinstance(flow, Flow)
        agg.add(flow)
    assert not [key for key in agg.findings if key[0] == "unselectable"]
    peers = {
        (selector.get("matchLabels") or {}).get("app")
        for plan in agg.plans()
        for rule in yaml.safe_load(
            render_policy(plan.name, plan.namespace, plan.target.selector, plan.rules)
        )["spec"].get("ingress", [])
        for selector in rule.get("fromEndpoints", [])
    }
    assert {"productpage", "reviews"} <= peers
