"""Knowing when a capture is enough (§D59), as a user runs cpg: the public 0.47-second and
UDP-only captures are said to be so, their workloads keep learning with the reason in the
summary, plan and both reports, and --only-ready writes nothing for them; a two-day synthetic
capture makes its stable workloads ready, its late ones not, and keeps the nightly job's peer;
a restarted generate keeps adding to the profile; a folder cpg 0.2 wrote is read as it is."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from conftest import CORPUS, ROOT, cpg, jsonl

sys.path.insert(0, str(ROOT / "benchmarks"))
from synthetic import late, synthetic_capture

SHARED_MISSING = not CORPUS.is_dir()
TEN = CORPUS / "hubble-otel__basic-sample-10-flows.json"
UDP = CORPUS / "hubble-otel__basic-sample-400-udp-flows.json"


@pytest.mark.skipif(SHARED_MISSING, reason="../shared/corpus is not there")
def test_a_short_or_one_protocol_capture_is_said_so_everywhere(tmp_path: Path) -> None:
    for capture, span, why in (
        (TEN, "Capture: 0.47 s", "observed for 0 s (needs 1 d)"),
        (UDP, "Capture: 5.33 s", "the capture holds UDP only"),
    ):
        general = "observed for less than 1 d" if capture is TEN else why
        out = tmp_path / capture.stem
        ran = cpg("replay", str(capture), "-d", str(out), "--learn", "forwarded")
        assert ran.returncode == 0, ran.stderr
        assert span in ran.stdout and "keep learning  bookinfo/" in ran.stdout, ran.stdout
        assert why in ran.stdout
        data = json.loads(
            cpg(
                "replay",
                str(capture),
                "-d",
                str(tmp_path / "j"),
                "--learn",
                "forwarded",
                "-o",
                "json",
            ).stdout
        )
        assert data["capture_profile"]["span_seconds"] < 6
        assert data["readiness"] and not any(p["ready"] for p in data["readiness"])
        planned = cpg("plan", str(capture), "-d", str(out))
        assert (
            "of capture; 0 of" in planned.stdout and "workloads ready to enforce" in planned.stdout
        )
        assert "keep learning  bookinfo/" in planned.stdout
        markdown = cpg("report", "-d", str(out)).stdout
        assert "## Readiness: 0 of" in markdown and general in markdown
        assert markdown.index("## Readiness") < markdown.index("## Coverage")
        html = cpg("report", "-d", str(out), "-o", "html").stdout
        assert 'id="readiness"' in html and "<polyline" in html
        only = tmp_path / f"only-{capture.stem}"
        held = cpg("replay", str(capture), "-d", str(only), "--learn", "forwarded", "--only-ready")
        assert held.returncode == 0
        assert not list(only.rglob("*.yaml")), "nothing is written for workloads to keep learning"
        assert "not written: its workload should keep learning" in held.stdout


def test_two_days_make_the_stable_workloads_ready_and_the_late_ones_not(tmp_path: Path) -> None:
    capture = synthetic_capture(tmp_path / "two-days.jsonl", 20, days=2)
    out = tmp_path / "policies"
    ran = cpg("replay", str(capture), "-d", str(out), "-o", "json")
    assert ran.returncode == 0, ran.stderr
    verdicts = {f"{p['namespace']}/{p['workload']}": p for p in json.loads(ran.stdout)["readiness"]}
    from synthetic import endpoints

    for namespace, members in endpoints(20):
        for workload in members:
            name = f"{namespace}/{workload['labels'][0].split('=', 1)[1]}"
            if late(workload):
                assert not verdicts[name]["ready"], name
                assert (
                    "a new rule appeared 4 h 30 m before its last flow"
                    in verdicts[name]["reasons"][0]
                )
    assert verdicts["app-01/api"]["ready"] and verdicts["app-01/db"]["ready"]
    assert verdicts["app-01/api"]["span_seconds"] > 1.9 * 86_400
    # the nightly job, seen once, is in the db's policy; the job itself keeps learning
    db = yaml.safe_load((out / "app-01" / "db.yaml").read_text())
    peers = [r.get("fromEndpoints") for r in db["spec"]["ingress"]]
    assert [
        {"matchLabels": {"app": "nightly-backup", "io.kubernetes.pod.namespace": "ops"}}
    ] in peers
    assert not verdicts["ops/nightly-backup"]["ready"]
    markdown = cpg("report", "-d", str(out)).stdout
    assert "| app-01/api | ready to enforce | stable for 1 d 23 h: no new rule since" in markdown
    html = cpg("report", "-d", str(out), "-o", "html").stdout
    curve = html.split('id="readiness"', 1)[1].split("</section>", 1)[0]
    assert curve.count("<polyline") == len(verdicts)
    only = tmp_path / "only"
    assert cpg("replay", str(capture), "-d", str(only), "--only-ready").returncode == 0
    written = {
        f"{p.parent.name}/{p.stem}" for p in only.rglob("*.yaml") if p.parent.name != "_shared"
    }
    ready = {name for name, p in verdicts.items() if p["ready"]}
    assert written == ready


def test_a_restarted_generate_keeps_adding_to_the_profile(tmp_path: Path) -> None:
    """Two live sessions a day apart, each on its own flows: the evidence (and so the
    profile) spans both, and the second session says the workload is observed for a day."""
    from conftest import endpoint, flow_dict
    from fake_relay import fake_relay, responses_from_lines

    out = tmp_path / "live"
    for day, port in (("2026-11-01", 8080), ("2026-11-02", 8080)):
        flows = [
            flow_dict(
                endpoint("shop", "web"),
                endpoint("shop", "cart"),
                tcp=port,
                time=f"{day}T{h:02d}:00:00Z",
            )
            for h in range(0, 24, 2)
        ]
        with fake_relay(responses_from_lines(jsonl(flows).splitlines())) as (_r, address):
            ran = cpg(
                "generate",
                "--server",
                address,
                "-d",
                str(out),
                "--duration",
                "1s",
                "--ready-min-flows",
                "10",
                "-o",
                "json",
            )
        assert ran.returncode == 0, ran.stderr
    data = json.loads(ran.stdout)
    # the second session's own capture: its day, its flows, the width of its rules
    capture = data["capture_profile"]
    assert (capture["first"], capture["last"]) == ("2026-11-02T00:00:00Z", "2026-11-02T22:00:00Z")
    assert capture["flows"] == 12 and capture["protocols"] == {"TCP": 12}
    assert capture["directions"] == ["ingress"] and capture["namespaces"] == ["shop"]
    cart = next(p for p in data["readiness"] if p["workload"] == "cart")
    assert cart["first"] == "2026-11-01T00:00:00Z" and cart["last"] == "2026-11-02T22:00:00Z"
    assert cart["flows"] == 24 and cart["ready"], cart


def test_a_folder_cpg_0_2_wrote_is_read_for_its_profile(tmp_path: Path) -> None:
    fixture = ROOT / "tests" / "fixtures" / "evidence-0.2.0"
    folder = tmp_path / "repo"
    shutil.copytree(fixture, folder)
    explained = cpg("explain", "shop/cart", "-d", str(folder / "policies"))
    assert explained.returncode == 0, explained.stderr
    assert "Observed " in explained.stdout and "Keep learning:" in explained.stdout


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_capture_says_where_it_has_gaps_and_which_nodes_its_samples_name(
    tmp_path: Path, jobs: str
) -> None:
    """Two bursts three hours apart: the summary and -o json name the stretch without a flow
    (from flows per minute, also when the flows come through the fast path), and the nodes
    the sample flows came from, the same with one job or two."""
    from conftest import endpoint, flow_dict

    flows = [
        flow_dict(
            endpoint("shop", "web"),
            endpoint("shop", app),
            time=f"2026-11-02T{hour:02d}:{minute:02d}:00Z",
            node_name=f"node-{app}",
        )
        for hour in (10, 13)
        for minute in range(0, 30, 5)
        for app in ("cart", "search")
    ]
    capture = tmp_path / "bursts.jsonl"
    capture.write_text(jsonl(flows))
    ran = cpg("replay", str(capture), "-d", str(tmp_path / jobs), "-j", jobs)
    assert ran.returncode == 0, ran.stderr
    line = next(x for x in ran.stdout.splitlines() if x.startswith("Capture:"))
    assert "2 nodes in its samples" in line
    assert "1 gap without a flow (longest 2 h 34 m from 2026-11-02T10:26:00Z)" in line, line
    data = json.loads(
        cpg(
            "replay", str(capture), "-d", str(tmp_path / f"j{jobs}"), "-j", jobs, "-o", "json"
        ).stdout
    )
    profile = data["capture_profile"]
    assert profile["nodes"] == ["node-cart", "node-search"]
    assert profile["gaps"] == [["2026-11-02T10:26:00Z", "2026-11-02T13:00:00Z"]]


def test_the_plan_rolls_the_ready_workloads_out_those_nothing_depends_on_first(
    tmp_path: Path,
) -> None:
    capture = synthetic_capture(tmp_path / "two-days.jsonl", 20, days=2)
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--shared", "0").returncode == 0
    planned = cpg("plan", str(capture), "-d", str(out), "-o", "json")
    rollout = json.loads(planned.stdout)["rollout"]
    batches = rollout["batches"]
    placed = [w for b in batches for w in b["workloads"]]
    assert batches[0]["depended_on_by"] == 0 and batches[-1]["workloads"] == [
        "kube-system/kube-dns"
    ]
    # a database comes after the api that calls it, and nothing waits without a reason
    assert placed.index("app-01/db") > placed.index("app-01/api")
    waiting = {w["workload"]: w["why"] for w in rollout["waiting"]}
    assert waiting["ops/nightly-backup"].startswith("keep learning: observed for 0 s")
    assert set(waiting) | set(placed) >= {"app-01/web", "app-01/api", "app-01/db"}
    assert not set(waiting) & set(placed)
    first = batches[0]
    assert first["apply"] == "kubectl apply " + " ".join(f"-f {f}" for f in first["files"])
    text = cpg("plan", str(capture), "-d", str(out)).stdout
    assert f"Rollout: {len(batches)} batches of {len(placed)} ready workloads" in text
    assert f"     check:  {first['shadow']}" in text and f"     apply:  {first['apply']}" in text
    # the batch's own check: a plan of its policies alone
    only = [a for p in first["policies"] for a in ("--only", p)]
    alone = cpg("plan", str(capture), "-d", str(out), *only)
    assert f"Plan for {len(first['policies'])} proposed policies" in alone.stdout
    typo = cpg("plan", str(capture), "-d", str(out), "--only", "app-01/cpg-ap")
    assert typo.returncode == 2 and "did you mean app-01/cpg-api?" in typo.stderr
    markdown = cpg("report", "-d", str(out), "--plan", str(_plan_file(tmp_path, planned.stdout)))
    assert "## Rollout" in markdown.stdout and f"`{first['shadow']}`" in markdown.stdout
    # shared policies tie their members: said, and applied together
    tied = tmp_path / "tied"
    assert cpg("replay", str(capture), "-d", str(tied)).returncode == 0
    said = cpg("plan", str(capture), "-d", str(tied)).stdout
    assert (
        "workloads share policies (_shared/)" in said
        and "without sharing (the shared option at 0)" in said
    )


def _plan_file(folder: Path, text: str) -> Path:
    path = folder / "plan.json"
    path.write_text(text)
    return path
