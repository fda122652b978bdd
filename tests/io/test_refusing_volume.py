"""A refusing volume costs no rule (issue 67): a live session whose folder refuses writes for
two flushes — while some workloads' flows stop, one policy changes at every flush and a rule
crosses --shared — then accepts them, leaves the folder a replay of the same flows writes;
its write-failure counter is exported from the start, so Prometheus' own rule engine fires
the alert on the first failing flush."""

from __future__ import annotations

import shutil
import subprocess
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import cpg, endpoint, flow_dict, jsonl, policies
from fake_relay import responses_from_lines

SHARE = "3"


def _egress(source: str, target: str, port: int, minute: int) -> dict[str, Any]:
    return flow_dict(
        endpoint("shop", source),
        endpoint("shop", target),
        tcp=port,
        direction="EGRESS",
        src_ip=f"10.0.0.{ord(source[-1])}",
        dst_ip="10.0.1.1",
        time=f"2026-11-02T10:{minute:02d}:00Z",
    )


# each workload calls its own service, and every one calls the api: that rule reaches the
# share threshold (3) in the second batch, when the folder refuses writes
BATCHES = [
    [
        _egress("c1", "own1", 80, 0),
        _egress("c1", "api", 8080, 0),
        _egress("c2", "own2", 80, 0),
        _egress("c2", "api", 8080, 0),
    ],
    [_egress("c3", "own3", 80, 1), _egress("c3", "api", 8080, 1), _egress("c1", "own1", 81, 1)],
    [_egress("c1", "own1", 82, 2), _egress("c4", "own4", 80, 2), _egress("c4", "api", 8080, 2)],
]
"""c2's flows stop after the first batch; c1's policy changes at every one."""


def _session(out: Path, evidence: Path) -> Any:
    from cpg_core import RunRequest
    from cpg_io.runs._live import LiveCapture, live_settings

    request = RunRequest.build(shared=int(SHARE))
    relay = types.SimpleNamespace(server="127.0.0.1:9", in_cluster=None)
    settings = live_settings(
        request,
        out,
        relay,  # type: ignore[arg-type]
        now="2026-11-02T09:00:00Z",
        evidence_dir=evidence,
    )
    return LiveCapture(settings)


def _take(capture: Any, flows: list[dict[str, Any]]) -> None:
    for response in responses_from_lines(jsonl(flows).splitlines()):
        with capture._lock:
            capture._take(response)


def _failures(capture: Any) -> dict[str, float]:
    """``cpg_write_failures_total`` by reason, as a scrape reads it now."""
    found = {}
    for family in capture.metric_families():
        if family.name == "cpg_write_failures":
            for sample in family.samples:
                if sample.name == "cpg_write_failures_total":
                    found[sample.labels["reason"]] = sample.value
    return found


def test_a_folder_that_refuses_two_flushes_loses_no_rule(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out, evidence = tmp_path / "live", tmp_path / "evidence"
    capture = _session(out, evidence)
    scrapes = [_failures(capture)]  # before any flush: every reason already at 0
    assert scrapes[0] == {"no_space": 0, "permission": 0, "in_the_way": 0, "other": 0}
    _take(capture, BATCHES[0])
    capture.flush()
    scrapes.append(_failures(capture))
    assert (out / "shop" / "c1.yaml").is_file() and (out / "shop" / "c2.yaml").is_file()
    # the folder refuses: a file stands where the namespace's folder was
    aside = tmp_path / "aside"
    (out / "shop").rename(aside)
    (out / "shop").write_text("not a folder")
    for batch in BATCHES[1:]:
        _take(capture, batch)
        capture.flush()
        scrapes.append(_failures(capture))
    assert scrapes[2]["in_the_way"] >= 1, scrapes  # the first failing flush is counted
    # the log names every file a flush could not write, on one line
    named = [r.getMessage() for r in caplog.records if "could not write:" in r.getMessage()]
    assert named and all(f"shop/c{n}.yaml" in named[-1] for n in (1, 2, 3, 4)), named
    # it accepts writes again: what was queued is written at the last flush
    (out / "shop").unlink()
    aside.rename(out / "shop")
    capture.flush(final=True)
    scrapes.append(_failures(capture))
    capture.close()
    final = {f.path.name: f.outcome for f in capture.result.files}
    assert "failed" not in final.values(), final

    replay = tmp_path / "replay"
    flows = tmp_path / "all.jsonl"
    flows.write_text(jsonl([flow for batch in BATCHES for flow in batch]))
    ran = cpg("replay", str(flows), "-d", str(replay), "--shared", SHARE, "--no-evidence")
    assert ran.returncode == 0, ran.stderr
    assert policies(out) == policies(replay)
    shared = next((out / "_shared").glob("*shop-api*.yaml")).read_text()
    # c1..c4 share it: the rule moved out of the files of c1 and c2, written before
    assert all(f"- c{n}" in shared or f"app: c{n}" in shared for n in range(1, 5)), shared
    assert "8080" not in (out / "shop" / "c1.yaml").read_text()
    _alert_fires_on_the_first_failing_flush(tmp_path, scrapes)


def _alert_fires_on_the_first_failing_flush(
    tmp_path: Path, scrapes: list[dict[str, float]]
) -> None:
    """The counter as this session exported it at each flush (a scrape a minute), under the
    PrometheusRule's CpgWriteFailures: firing at the first failing flush's scrape."""
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool is needed (Debian's prometheus package)"
    root = Path(__file__).resolve().parents[2]
    groups = yaml.safe_load(
        (root / "deploy" / "components" / "monitoring" / "prometheusrule.yaml").read_text()
    )["spec"]["groups"]
    plain = [
        {**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
        for g in groups
    ]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": plain}))
    labels = 'job="cpg", cluster="east", namespace="cpg", pod="cpg-a"'
    series = [
        {
            "series": f'cpg_write_failures_total{{{labels}, reason="{reason}"}}',
            "values": " ".join(f"{scrape[reason]:g}" for scrape in scrapes),
        }
        for reason in scrapes[0]
    ]
    first_failing = next(n for n, scrape in enumerate(scrapes) if sum(scrape.values()))
    test = {
        "name": "the first failing flush alerts",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {
                "eval_time": f"{first_failing - 1}m",
                "alertname": "CpgWriteFailures",
                "exp_alerts": [],
            },
            {
                "eval_time": f"{first_failing}m",
                "alertname": "CpgWriteFailures",
                "exp_alerts": [
                    {
                        "exp_labels": {
                            "cluster": "east",
                            "namespace": "cpg",
                            "pod": "cpg-a",
                            "severity": "critical",
                        }
                    }
                ],
            },
        ],
    }
    unit = tmp_path / "test.yaml"
    unit.write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [test]})
    )
    ran = subprocess.run(
        [promtool, "test", "rules", str(unit)], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
