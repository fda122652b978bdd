"""RunRequest and CheckRequest: every run option checked once, with the field that is wrong."""

from __future__ import annotations

import pytest

from cpg_core import CheckRequest, RequestError, RunRequest


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"exit_code": True}, "exit_code"),
        ({"verify": True, "dry_run": True}, "verify"),
        ({"min_flows": 0}, "min_flows"),
        ({"max_malformed": 101.0}, "max_malformed"),
        ({"evidence_sessions": 0}, "evidence_sessions"),
        ({"engine": "spark"}, "engine"),
        ({"scheduler": "tcp://x:8786"}, "scheduler"),
        ({"part_size": "64MiB"}, "part_size"),
        ({"engine": "dask", "part_size": "12KiB"}, "part_size"),
        ({"engine": "dask", "since": "2h"}, "since"),
        ({"since": "yesterday"}, "since"),
        ({"relay_namespace": "Kube_System"}, "relay_namespace"),
        ({"evidence_interval": "0s"}, "evidence_interval"),
        ({"ignore_protocols": ["tcp", "gre"]}, "ignore_protocol"),
    ],
)
def test_a_bad_value_names_its_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(RequestError) as raised:
        RunRequest.build(**values)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_a_dry_run_records_no_evidence_and_keeps_no_samples() -> None:
    dry = RunRequest.build(dry_run=True, exit_code=True, evidence_samples=7)
    assert not dry.evidence.record and dry.aggregate_options().max_samples == 0
    wet = RunRequest.build(evidence_samples=7)
    assert wet.evidence.record and wet.aggregate_options().max_samples == 7
    assert RunRequest.build(evidence=False).aggregate_options().max_samples == 0


def test_the_dask_engine_takes_a_size_and_a_scheduler() -> None:
    request = RunRequest.build(engine="dask", scheduler="local:3", part_size="1GiB", jobs=2)
    assert request.engine.kind == "dask" and request.engine.scheduler == "local:3"
    assert request.engine.part_bytes == 1 << 30 and request.engine.jobs == 2


def test_a_live_window_counts_back_from_now_and_stops_at_until() -> None:
    now = "2026-12-01T12:00:00.000000Z"
    request = RunRequest.build(since="30m", until="2026-12-01T12:10:00Z", duration="1h")
    since, until, stop_after = request.live_window(now)
    assert since.startswith("2026-12-01T11:30:00") and until.startswith("2026-12-01T12:10:00")
    assert stop_after == pytest.approx(600.0)
    past = RunRequest.build(until="2026-12-01T11:00:00Z")
    with pytest.raises(RequestError, match="not a time in the future") as raised:
        past.live_window(now)
    assert raised.value.field == "until"


def test_a_check_takes_current_or_cluster_and_a_boolean_default() -> None:
    with pytest.raises(RequestError) as both:
        CheckRequest.build(inputs=["x.jsonl"], current="today/", cluster=True)
    assert both.value.field == "current"
    with pytest.raises(RequestError) as bad:
        CheckRequest.build(inputs=["x.jsonl"], default_local_cluster="maybe")
    assert bad.value.field == "policy_default_local_cluster"
    with pytest.raises(RequestError):
        CheckRequest.build(inputs=[])
    check = CheckRequest.build(inputs=["x.jsonl"], default_local_cluster="False")
    assert check.default_local_cluster is False and check.policies == "policies"
