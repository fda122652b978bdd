"""The one table of output formats, and the run report rendered from its document."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from cpg_core import Decision, VerifyCheck, VerifyReport, to_data
from cpg_core.reading import ReadStats
from cpg_core.reports import FORMATS, FileOutcome, RunReport, formats, render


def _report(**changes: object) -> RunReport:
    values: dict[str, object] = {
        "source": "drops.jsonl",
        "output_dir": "policies",
        "dry_run": False,
        "evidence": True,
        "stats": ReadStats(lines_read=3),
        "total_flows": 3,
        "decisions": {Decision.CANDIDATE: 2, Decision.REPLY: 1},
        "ignored_protocols": {},
        "ignored_reasons": {},
        "filtered_namespace": 0,
        "files": (
            FileOutcome(
                path="policies/shop/cart.yaml",
                outcome="created",
                namespace="shop",
                workload="cart",
                name="cpg-cart",
            ),
        ),
        "health": None,
        "evidence_dir": None,
        "health_path": None,
        "held_back": (),
        "min_flows": 1,
        "kustomized": False,
        "evidence_errors": (),
        "exit_code": 0,
    }
    values.update(changes)
    return RunReport(**values)  # type: ignore[arg-type]


def test_every_kind_lists_its_formats_and_renders_each() -> None:
    assert formats("run") == ("text", "json")
    assert formats("review") == ("markdown", "html", "json")
    assert set(FORMATS) == {"run", "review", "plan", "verify", "explain", "why", "drift", "lint"}
    assert formats("drift") == ("text", "json")
    assert formats("why") == ("text", "json")
    assert formats("explain") == ("text", "json", "yaml")
    with pytest.raises(ValueError, match="a run report is one of text, json"):
        render(_report(), "xml")
    # yaml is the json document as YAML, for every kind that has json
    assert yaml.safe_load(render(_report(), "yaml")) == json.loads(render(_report(), "json"))


def test_the_run_report_json_is_its_wire_form() -> None:
    report = _report(extra={"reconnects": 2})
    data = json.loads(render(report, "json"))
    assert data == to_data(report)
    assert data["flows"]["candidate"] == 2 and data["flows"]["total"] == 3
    assert data["policies"] == [
        {
            "path": "policies/shop/cart.yaml",
            "outcome": "created",
            "namespace": "shop",
            "workload": "cart",
            "name": "cpg-cart",
        }
    ]
    assert data["reconnects"] == 2 and "verify" not in data


def test_the_run_text_says_what_was_written_and_what_verify_found() -> None:
    check = VerifyCheck(
        kind="candidate",
        traffic="ingress shop/web → shop/cart TCP/8080",
        flows=2,
        allowed=False,
        reason="no rule admits it",
    )
    report = _report(verify=VerifyReport(checks=(check,)), verb="Received", redacted=True)
    text = render(report, "text")
    assert text.startswith("Received 3 lines from drops.jsonl")
    assert "  created      shop/cart.yaml" in text
    assert "  verify: ingress shop/web → shop/cart TCP/8080: no rule admits it" in text
    assert "Evidence redacted" in text
    assert "verify" in json.loads(render(report, "json"))


def test_the_review_json_holds_the_coverage_and_the_namespace_matrix() -> None:
    from cpg_core.reports import Review, ReviewInputs

    def policy(name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNetworkPolicy",
            "metadata": {"name": f"cpg-{name}", "namespace": "shop"},
            "spec": {"endpointSelector": {"matchLabels": {"app": name}}, **spec},
        }

    from_web = [{"fromEndpoints": [{"matchLabels": {"app": "web"}}]}]
    inputs = ReviewInputs(
        policies=[
            policy("api", ingress=from_web),
            policy("web", egress=[{"toEntities": ["world"]}]),
        ],
        evidence={},
        health=None,
        plan=None,
        problems=[],
    )
    data = json.loads(render(Review(title="policies", inputs=inputs), "json"))
    assert data["policies"] == 2 and data["would_break_flows"] is None
    assert data["coverage"]["workloads"] == 2
    assert (data["coverage"]["ingress"], data["coverage"]["egress"]) == (1, 1)
    assert data["namespaces"] == ["shop", "outside the cluster"]
    assert [(c["source"], c["target"], c["connections"]) for c in data["matrix"]] == [
        ("shop", "shop", 1),
        ("shop", "outside the cluster", 1),
    ]
    assert data["matrix"][0]["links"] == [
        {
            "source": "wl:shop/web",
            "target": "wl:shop/api",
            "ports": ["any port"],
            "status": "allowed",
        }
    ]
