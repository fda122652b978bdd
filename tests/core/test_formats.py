"""The one table of output formats, and the run report rendered from its document."""

from __future__ import annotations

import json

import pytest

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
    assert formats("review") == ("markdown", "html")
    assert set(FORMATS) == {"run", "review", "plan", "verify", "explain", "why", "drift", "lint"}
    assert formats("drift") == ("text", "json")
    assert formats("why") == ("text", "json")
    assert formats("explain") == ("text", "json", "yaml")
    with pytest.raises(ValueError, match="a run report is one of text, json"):
        render(_report(), "yaml")


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
