"""Real Hubble captures (../shared/corpus): every line parses, and the same flows, replayed as
if they had been denied, give CRD-valid policies with stable selectors only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import CORPUS, assert_crd_valid
from cpg_core.aggregate import Aggregator
from cpg_core.decide import Decision
from cpg_core.flow import Flow
from cpg_core.parse import FlowParser
from cpg_core.render import render_policy

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
