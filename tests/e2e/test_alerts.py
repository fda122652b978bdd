"""cpg's alerts under Prometheus' own rule engine: ``promtool`` (Debian's ``prometheus``
package) checks the rules and runs unit tests of every alert with one cpg instance, and with
two in one Prometheus (two clusters), where only the broken one may fire, with its labels."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "components" / "monitoring" / "prometheusrule.yaml"
RUNBOOK = ROOT / "docs" / "runbook.md"

A = {"job": "cpg", "namespace": "cpg", "pod": "cpg-a", "cluster": "east", "instance": "a:9090"}
B = {"job": "cpg", "namespace": "cpg", "pod": "cpg-b", "cluster": "west", "instance": "b:9090"}


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI") or os.environ.get("CPG_REQUIRE_PROMTOOL"):
            raise AssertionError("promtool is needed (Debian's prometheus package)")
        pytest.skip("promtool is not installed (Debian's prometheus package)")
    return found


def _series(name: str, labels: dict[str, str], values: str, **more: str) -> dict[str, str]:
    body = ", ".join(f'{k}="{v}"' for k, v in {**labels, **more}.items())
    return {"series": f"{name}{{{body}}}", "values": values}


def _target(labels: dict[str, str], *extra: str) -> dict[str, str]:
    """The labels an alert about the instance ``labels`` keeps (besides its own)."""
    return {k: labels[k] for k in ("cluster", "namespace", "pod", *extra)}


# alert -> (series of an instance that is broken, series of one that is fine, when to look,
# the labels the alert keeps of the broken instance: None for all of them)
def _cases() -> dict[str, tuple[Any, Any, str, Any]]:
    def histogram(labels: dict[str, str], fast: bool) -> list[dict[str, str]]:
        name = "cpg_flush_duration_seconds_bucket"
        under = "0+1x80" if fast else "0x80"
        return [
            _series(name, labels, under, le="30"),
            _series(name, labels, "0+1x80", le="60"),
            _series(name, labels, "0+1x80", le="+Inf"),
        ]

    return {
        "CpgDown": (
            lambda i: [_series("up", i, "0x20")],
            lambda i: [_series("up", i, "1x20")],
            "10m",
            None,
        ),
        "CpgRelayDisconnected": (
            lambda i: [_series("cpg_relay_connected", i, "0x20")],
            lambda i: [_series("cpg_relay_connected", i, "1x20")],
            "10m",
            _target,
        ),
        "CpgNoFlows": (
            lambda i: [
                _series("cpg_flows_received_total", i, "100x40"),
                _series("cpg_relay_connected", i, "1x40"),
            ],
            lambda i: [
                _series("cpg_flows_received_total", i, "0+10x40"),
                _series("cpg_relay_connected", i, "1x40"),
            ],
            "35m",
            _target,
        ),
        "CpgRelayLagging": (
            lambda i: [_series("cpg_relay_lag_seconds", i, "600x30")],
            lambda i: [_series("cpg_relay_lag_seconds", i, "5x30")],
            "15m",
            _target,
        ),
        "CpgLostEvents": (
            lambda i: [_series("cpg_lost_events_total", i, "0+5x20")],
            lambda i: [_series("cpg_lost_events_total", i, "0x20")],
            "10m",
            _target,
        ),
        "CpgWriteFailures": (
            lambda i: [_series("cpg_write_failures_total", i, "0+1x20", reason="no_space")],
            lambda i: [_series("cpg_write_failures_total", i, "0x20", reason="no_space")],
            "10m",
            _target,
        ),
        "CpgShadowWouldBreak": (
            lambda i: [_series("cpg_shadow_would_break", i, "3x10")],
            lambda i: [_series("cpg_shadow_would_break", i, "0x10")],
            "5m",
            _target,
        ),
        "CpgDriftFound": (
            lambda i: [_series("cpg_drift_findings", i, "2x60", kind="stale")],
            lambda i: [_series("cpg_drift_findings", i, "0x60", kind="stale")],
            "40m",
            lambda labels: {**_target(labels), "kind": "stale"},
        ),
        "CpgSlowFlushes": (
            lambda i: histogram(i, fast=False),
            lambda i: histogram(i, fast=True),
            "65m",
            _target,
        ),
    }


def _rules(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The PrometheusRule's groups as a plain rules file, without annotations (promtool's
    unit tests compare them too; `promtool check rules` checks their templates)."""
    groups = yaml.safe_load(RULES.read_text())["spec"]["groups"]
    plain = [
        {
            **group,
            "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in group["rules"]],
        }
        for group in groups
    ]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": plain}))
    (tmp_path / "full.yaml").write_text(yaml.safe_dump({"groups": groups}))
    return path, [rule for group in groups for rule in group["rules"]]


def _expected(alert: str, labels: dict[str, str] | None, rule: dict[str, Any]) -> list[Any]:
    if labels is None:
        return []
    return [{"exp_labels": {**labels, **rule["labels"]}}]


def test_promtool_checks_every_rule_and_its_templates(tmp_path: Path) -> None:
    promtool = _promtool()
    _rules(tmp_path)
    ran = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "full.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_every_alert_fires_for_the_broken_instance_only(tmp_path: Path) -> None:
    """For every alert: one broken instance fires; one that is fine does not; with two
    instances in one Prometheus, the broken one fires with its own cluster, namespace and
    pod, and the other stays silent (an aggregate over every cpg would hide it)."""
    promtool = _promtool()
    path, rules = _rules(tmp_path)
    by_name = {rule["alert"]: rule for rule in rules}
    cases = _cases()
    assert set(by_name) - {"CpgNotScraped"} == set(cases), "every alert has a case"
    tests = []
    for alert, (broken, fine, when, keeps) in cases.items():
        rule = by_name[alert]

        def labels(instance: dict[str, str], keeps: Any = keeps, broken: Any = broken) -> Any:
            if keeps is not None:
                return keeps(instance)
            (series,) = broken(instance)
            return dict(re.findall(r'(\w+)="([^"]*)"', series["series"]))

        for name, series, expected in (
            ("one broken", broken(A), _expected(alert, labels(A), rule)),
            ("one fine", fine(A), []),
            ("two, one broken", broken(A) + fine(B), _expected(alert, labels(A), rule)),
            ("two, the other broken", fine(A) + broken(B), _expected(alert, labels(B), rule)),
        ):
            tests.append(
                {
                    "name": f"{alert}: {name}",
                    "interval": "1m",
                    "input_series": series,
                    "alert_rule_test": [
                        {"eval_time": when, "alertname": alert, "exp_alerts": expected}
                    ],
                }
            )
    absent = by_name["CpgNotScraped"]
    wanted = {"job": "kube-state-metrics", "namespace": "cpg", "deployment": "cpg"}
    tests.append(
        {
            "name": "CpgNotScraped: no cpg target at all",
            "interval": "1m",
            "input_series": [
                _series("up", {"job": "node"}, "1x30"),
                _series("kube_deployment_spec_replicas", wanted, "1x30"),
            ],
            "alert_rule_test": [
                {
                    "eval_time": "20m",
                    "alertname": "CpgNotScraped",
                    "exp_alerts": [{"exp_labels": {"job": "cpg", **absent["labels"]}}],
                }
            ],
        }
    )
    tests.append(
        {
            "name": "CpgNotScraped: the archive overlay, a CronJob and no Deployment",
            "interval": "1m",
            "input_series": [
                _series("up", {"job": "node"}, "1x60"),
                _series(
                    "kube_cronjob_info", {"job": "kube-state-metrics", "cronjob": "cpg"}, "1x60"
                ),
            ],
            "alert_rule_test": [
                {"eval_time": "50m", "alertname": "CpgNotScraped", "exp_alerts": []}
            ],
        }
    )
    tests.append(
        {
            "name": "CpgNotScraped: two targets, one down (CpgDown's case)",
            "interval": "1m",
            "input_series": [_series("up", A, "0x30"), _series("up", B, "1x30")],
            "alert_rule_test": [
                {"eval_time": "20m", "alertname": "CpgNotScraped", "exp_alerts": []}
            ],
        }
    )
    unit = tmp_path / "alerts_test.yaml"
    unit.write_text(
        yaml.safe_dump({"rule_files": [path.name], "evaluation_interval": "1m", "tests": tests})
    )
    ran = subprocess.run(
        [promtool, "test", "rules", str(unit)], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "SUCCESS" in ran.stdout + ran.stderr


def test_every_alert_links_to_its_runbook_section(tmp_path: Path) -> None:
    _, rules = _rules(tmp_path)
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line[3:].strip().lower()).replace(" ", "-")
        for line in RUNBOOK.read_text().splitlines()
        if line.startswith("## ")
    }
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert page.endswith("/docs/runbook.md"), url
        assert anchor == rule["alert"].lower() and anchor in anchors, url
