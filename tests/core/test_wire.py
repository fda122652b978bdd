"""One converter owns the wire form of every document: what cpg writes structures back into the
same typed value, and the typed value unstructures to the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import EXAMPLE, cpg
from cpg_core import (
    ClusterHealth,
    DocumentError,
    DroppedFlowCount,
    DroppedFlowSample,
    ExplainFilter,
    ExplainResult,
    PolicyEvidence,
    VerifyReport,
    explain_record,
    from_data,
    generate,
    parse_evidence,
    render_evidence,
    to_data,
    to_json,
)
from cpg_core._reports.dropped import aggregate_rows, flow_samples


def test_every_document_round_trips(tmp_path: Path) -> None:
    out, evidence = tmp_path / "policies", tmp_path / "evidence"
    ran = cpg("replay", str(EXAMPLE), "-d", str(out), "--evidence-dir", str(evidence))
    assert ran.returncode == 0, ran.stderr
    (base,) = evidence.iterdir()
    health_text = (base / "cluster-health.json").read_text()
    health = from_data(json.loads(health_text), ClusterHealth, "cluster-health.json")
    assert to_json(health) == health_text, "the file's bytes come back from the typed value"
    for path in sorted(base.glob("*/*.json")):
        text = path.read_text()
        doc = parse_evidence(text, str(path))
        assert render_evidence(doc) == text
        record = explain_record(doc, ExplainFilter())
        assert from_data(to_data(record), ExplainResult) == record
        for row in flow_samples(path.parent.name, path.stem, doc):
            assert from_data(to_data(row), DroppedFlowSample) == row
    for count in aggregate_rows(health):
        assert from_data(to_data(count), DroppedFlowCount) == count
        assert set(to_data(count)) == {"namespace", "workload", "reason", "class", "count"}

    verified = cpg("verify", str(EXAMPLE), "--policies", str(out), "--output", "json")
    report = from_data(json.loads(verified.stdout), VerifyReport)
    assert to_json(report) == verified.stdout
    assert report.passed and report.candidates.total == report.candidates.admitted > 0


def test_a_document_of_the_wrong_shape_names_the_field() -> None:
    doc = to_data(next(iter(generate(EXAMPLE.read_text().splitlines()).evidence.values())))
    doc["rules"][0]["flow_count"] = "lots"
    with pytest.raises(DocumentError, match=r"rules\[0\]\.flow_count"):
        from_data(doc, PolicyEvidence, "x.json")
    doc["rules"][0]["peer"] = {"type": "planet", "name": "mars"}
    with pytest.raises(DocumentError, match="type 'planet' is not one of endpoint"):
        from_data(doc, PolicyEvidence, "x.json")
    with pytest.raises(DocumentError, match=r"^x\.json: .*sessions"):
        from_data({"policy": {}, "sessions": 5}, PolicyEvidence, "x.json")


def test_a_plan_goes_through_the_one_converter_and_back() -> None:
    from cpg_core import DocumentError, Plan, from_data, to_data
    from cpg_core._review.plan_documents import Traffic, WouldBreak

    traffic = Traffic("ingress", "shop/web", "shop/cart", "TCP", 8080, 4, "sample")
    plan = Plan(
        current_source="inferred",
        blind_spots="",
        candidates=2,
        fixed=1,
        not_fixed=(traffic,),
        would_break=(WouldBreak(traffic, "shop/cart", {"app": "cart"}, "cpg-cart", {}, "w", "f"),),
        newly_enforced=(),
        diffs=(),
        confidence=(),
        policies=(),
        forwarded_flows=9,
    )
    data = to_data(plan)
    assert data["would_break_flows"] == 4 and data["diffs"] == []
    assert from_data(data, Plan) == plan
    with pytest.raises(DocumentError, match="would_break"):
        from_data({**data, "would_break": [{"traffic": "nope"}]}, Plan)


def test_every_document_fits_the_schema_that_describes_it() -> None:
    import jsonschema

    from conftest import EXAMPLE
    from cpg_core import ClusterHealth, PolicyEvidence, document_schema, generate
    from cpg_core._base.documents import DroppedFlowCount, DroppedFlowSample
    from cpg_core.reports import aggregate_rows, flow_samples

    result = generate(EXAMPLE.read_text().splitlines(), now="2026-11-29T12:00:00Z")
    checked = 0
    for key, doc in result.evidence.items():
        jsonschema.validate(to_data(doc), document_schema(PolicyEvidence))
        namespace, workload = key.split("/")
        for sample in flow_samples(namespace, workload, doc):
            jsonschema.validate(to_data(sample), document_schema(DroppedFlowSample))
            checked += 1
    jsonschema.validate(to_data(result.health), document_schema(ClusterHealth))
    for row in aggregate_rows(result.health):
        jsonschema.validate(to_data(row), document_schema(DroppedFlowCount))
        checked += 1
    assert checked > 5 and result.evidence
    drop = document_schema(DroppedFlowCount)
    assert "class" in drop["properties"] and "drop_class" not in drop["properties"]
    with pytest.raises(jsonschema.ValidationError):  # the schema is not a blank cheque
        jsonschema.validate({"policy": {"name": 3}}, document_schema(PolicyEvidence))
