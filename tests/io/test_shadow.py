"""cpg shadow (issue 31): proposed policies judged on live traffic, against the project's fake
relay; the final plan is cpg plan over the same flows as a file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import attrs

from captures import ingress_capture
from conftest import cpg, flow_dict, jsonl, wait_for
from cpg_core import CheckRequest, RunRequest, plan
from cpg_core.reports import render
from cpg_core.shadow import PlanJudge, ShadowRequest, WouldBreak
from cpg_io import runs
from cpg_io.policy_files import load_policies
from cpg_io.sources import CaptureFlows
from fake_relay import fake_relay, responses_from_lines


def _proposal(tmp_path: Path) -> tuple[Path, Path]:
    """The newly-enforced-pod case: replay makes shop/api select app=api, and api-v2 pods
    (never policed) get forwarded traffic from prometheus that the proposal would drop."""
    capture = ingress_capture(tmp_path / "all.jsonl", allowed_by=True)
    out = tmp_path / "proposed"
    ran = cpg("replay", str(capture), "-d", str(out), "--no-evidence")
    assert ran.returncode == 0, ran.stderr
    return capture, out


def test_the_judge_at_any_moment_is_the_plan_of_the_flows_so_far(tmp_path: Path) -> None:
    capture, out = _proposal(tmp_path)
    proposal = load_policies(out)
    flows = list(CaptureFlows([str(capture)]))
    judge = PlanJudge(proposal, None, current_source="flows")
    for count, flow in enumerate(flows, 1):
        judge.add(flow)
        if count in (1, 2, 3, 9, len(flows)):
            expected = plan(flows[:count], proposal, None, current_source="flows")
            assert judge.plan() == expected, count
    assert judge.plan().breaks and judge.flows == len(flows)


def test_shadow_reports_what_would_break_at_the_first_flush_after_it_arrives(
    tmp_path: Path,
) -> None:
    capture, out = _proposal(tmp_path)
    lines = capture.read_text().splitlines()
    responses = responses_from_lines(lines)
    announced: list[list[WouldBreak]] = []
    with fake_relay(responses) as (relay, address):
        relay.pause_after = 3  # two drops and the first prometheus → api-v2 flow, then wait
        request = ShadowRequest(
            check=CheckRequest.build(inputs=[address], policies=str(out)),
            live=RunRequest.build(server=address, flush_interval="1h"),
            report=str(tmp_path / "so-far.json"),
        )
        capture_run = runs.shadow(request, runs.RelayAccess(), on_break=announced.append)

        async def session() -> Any:
            task = asyncio.create_task(capture_run.run())
            assert await asyncio.to_thread(wait_for, lambda: capture_run.progress.flows == 3)
            first = await asyncio.to_thread(capture_run.flush)  # the one flush after arrival
            assert [len(items) for items in announced] == [1]
            (item,) = announced[0]
            assert item.traffic.source == "monitoring/prometheus" and item.traffic.port == 9090
            assert item.policy == "shop/cpg-api" and "version NotIn (v2)" in item.fix
            assert first.plan.would_break_flows == 1
            so_far = json.loads((tmp_path / "so-far.json").read_text())
            assert so_far["would_break"][0]["traffic"]["flows"] == 1  # readable while it runs
            relay.resume.set()
            assert await asyncio.to_thread(
                wait_for, lambda: capture_run.progress.flows == len(responses)
            )
            capture_run.stop.set()
            return await task

        final = asyncio.run(session())
    # the same kind of traffic is announced once, however often it comes back
    assert [len(items) for items in announced] == [1]
    expected = plan(CaptureFlows([str(capture)]), load_policies(out), None, current_source="flows")
    # the core plan, with the rollout the run adds (it knows the files): shop/api waits
    assert attrs.evolve(final.plan, rollout=None) == expected
    assert final.plan.would_break_flows == 12 and final.plan.rollout is not None
    assert [w.workload for w in final.plan.rollout.waiting] == ["shop/api"]
    assert final.plan.rollout.waiting[0].why.startswith("would break 12 flows")
    assert json.loads((tmp_path / "so-far.json").read_text()) == json.loads(render(final, "json"))
    assert [sorted(f.verdict) for f in relay.requests[0].whitelist] == [[1, 2, 4, 5]]


def test_cpg_shadow_ends_with_cpg_plan_on_the_same_flows(tmp_path: Path) -> None:
    capture, out = _proposal(tmp_path)
    with capture.open("a") as more:  # a reply and a DNS answer: judged, never would-break
        more.write(
            jsonl(
                [
                    flow_dict(verdict="FORWARDED", reason=None, reply=True, tcp=443),
                    flow_dict(verdict="FORWARDED", reason=None, udp=53, direction="EGRESS"),
                ]
            )
        )
    planned = cpg("plan", str(capture), "-d", str(out), "-o", "json")
    assert planned.returncode == 3, planned.stderr
    report = tmp_path / "shadow.json"
    with fake_relay(responses_from_lines(capture.read_text().splitlines())) as (_, address):
        shadowed = cpg(
            "shadow",
            "--server",
            address,
            "-d",
            str(out),
            "--duration",
            "2s",
            "--flush-interval",
            "0.3s",
            "--report",
            str(report),
            "-o",
            "json",
        )
        text = cpg(
            "shadow",
            "--server",
            address,
            "-d",
            str(out),
            "--duration",
            "1s",
            "--flush-interval",
            "0.2s",
        )
    assert shadowed.returncode == 3, shadowed.stderr
    assert json.loads(shadowed.stdout) == json.loads(planned.stdout)
    assert json.loads(report.read_text()) == json.loads(planned.stdout)
    assert text.returncode == 3
    # as it happens: announced once, with the policy and the fix, before the final plan
    assert text.stdout.count("WOULD BREAK: 1 new kind of traffic that works today") == 1
    assert text.stdout.index("WOULD BREAK: 1 new kind") < text.stdout.index("Plan for 1 proposed")
    assert "monitoring/prometheus → shop/api TCP/9090" in text.stdout
    assert "add version NotIn (v2) to the endpointSelector" in text.stdout
    assert "flows judged" in text.stderr


def test_shadow_says_when_it_saw_nothing_to_judge(tmp_path: Path) -> None:
    _capture, out = _proposal(tmp_path)
    drops = [flow_dict()]
    with fake_relay(responses_from_lines(jsonl(drops).splitlines())) as (_, address):
        ran = cpg("shadow", "--server", address, "-d", str(out), "--duration", "1s")
    assert ran.returncode == 4, ran.stderr
    assert "cannot judge what would break: the stream has no forwarded traffic" in ran.stderr


def test_shadow_flags_are_checked_before_connecting(tmp_path: Path) -> None:
    ran = cpg("shadow", "--server", "127.0.0.1:1", "--current", "x", "--cluster")
    assert ran.returncode == 2 and "not both" in ran.stderr
    ran = cpg("shadow", "--server", "127.0.0.1:1", "--until", "2020-01-01T00:00:00Z")
    assert ran.returncode == 2 and "not a time in the future" in ran.stderr


# --- generate --stable-for ------------------------------------------------------------------


def test_stable_for_writes_a_policy_only_after_a_quiet_window(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from cpg_core import AggregateOptions
    from cpg_core.reports import WaitingPolicy

    start = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    now = [start]
    out = tmp_path / "policies"
    from cpg_io.runs._live import LiveSettings

    settings = LiveSettings(
        server="127.0.0.1:1", output_dir=out, options=AggregateOptions(), stable_for=600.0
    )
    capture = runs.LiveCapture(settings, clock=lambda: now[0])

    def receive(port: int) -> None:
        (response,) = responses_from_lines([jsonl([flow_dict(tcp=port)]).strip()])
        capture._take(response)  # what the stream does with each response

    def at(minutes: int) -> None:
        now[0] = start + timedelta(minutes=minutes)
        capture.flush()

    cart = out / "shop" / "cart.yaml"
    receive(8080)
    at(0)
    assert not cart.exists()
    assert capture.result.waiting == [
        WaitingPolicy(
            namespace="shop", workload="cart", since="2026-11-02T10:00:00.000000Z", rules=1
        )
    ]
    receive(9090)  # it keeps gaining rules: the window starts again
    at(5)
    at(10)
    assert not cart.exists() and capture.result.waiting[0].since == "2026-11-02T10:05:00.000000Z"
    at(15)  # quiet for ten minutes: written, with everything it gained
    ports = [p["port"] for r in yaml_rules(cart) for p in r["toPorts"][0]["ports"]]
    assert sorted(ports) == ["8080", "9090"] and capture.result.waiting == []
    written = cart.read_text()
    receive(7070)  # a new rule for a written policy waits too; the file stays as it was
    at(16)
    capture.flush(final=True)
    assert cart.read_text() == written
    assert [w.rules for w in capture.result.waiting] == [3]


def yaml_rules(path: Path) -> list[Any]:
    import yaml

    return list(yaml.safe_load(path.read_text())["spec"]["ingress"])


def test_generate_stable_for_reports_what_waits(tmp_path: Path) -> None:
    from fake_relay import example_responses

    with fake_relay(example_responses()) as (_, address):
        ran = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(tmp_path / "live"),
            "--duration",
            "1s",
            "--flush-interval",
            "0.2s",
            "--stable-for",
            "1h",
            "-o",
            "json",
        )
        text = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(tmp_path / "t"),
            "--duration",
            "1s",
            "--stable-for",
            "1h",
            "--no-evidence",
        )
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["waiting"] and not list((tmp_path / "live").rglob("*.yaml"))
    assert {w["namespace"] + "/" + w["workload"] for w in report["waiting"]} >= {"shop/cart"}
    assert "Waiting (gained a rule within --stable-for 3600s; not written yet)" in text.stdout
    bad = cpg("generate", "--server", "127.0.0.1:1", "--stable-for", "soon")
    assert bad.returncode == 2 and "--stable-for" in bad.stderr


def test_a_shadow_survives_a_lost_stream_and_its_report_file_feeds_cpg_report(
    tmp_path: Path,
) -> None:
    capture, out = _proposal(tmp_path)
    records = [json.loads(line) for line in capture.read_text().splitlines()]
    for number, record in enumerate(records):  # uuids: a resumed stream re-sends, never twice
        record["flow"]["uuid"] = f"flow-{number}"
        record["flow"]["time"] = f"2026-11-02T10:01:{number:02d}Z"  # as a relay sends: in order
    capture.write_text(jsonl(records))
    planned = cpg("plan", str(capture), "-d", str(out), "-o", "json")
    report = tmp_path / "shadow.json"
    lines = capture.read_text().splitlines()
    with fake_relay(responses_from_lines(lines), break_after=6) as (relay, address):
        shadowed = cpg(
            "shadow",
            "--server",
            address,
            "-d",
            str(out),
            "--duration",
            "3s",
            "--flush-interval",
            "0.3s",
            "--report",
            str(report),
            "-o",
            "json",
        )
    assert shadowed.returncode == 3, shadowed.stderr
    assert len(relay.requests) >= 2 and "reconnected" in shadowed.stderr
    assert json.loads(shadowed.stdout) == json.loads(planned.stdout)
    markdown = cpg("report", "-d", str(out), "--plan", str(report))
    assert markdown.returncode == 0, markdown.stderr
    assert "monitoring/prometheus" in markdown.stdout and "9090" in markdown.stdout


def test_shadow_stable_for_feeds_the_readiness_verdict(tmp_path: Path) -> None:
    """A workload is ready once its evidence says so and a shadow run saw nothing its policy
    would drop for the last --ready-stable-for of the run: the same threshold, one verdict."""
    from conftest import endpoint

    web, api, scraper = endpoint("shop", "web"), endpoint("shop", "api"), endpoint("ops", "scraper")
    learned = tmp_path / "learned.jsonl"
    learned.write_text(
        jsonl([flow_dict(web, api, time=f"2026-11-02T10:{m:02d}:00Z") for m in (0, 5, 10)])
    )
    out = tmp_path / "proposed"
    assert cpg("replay", str(learned), "-d", str(out)).returncode == 0
    readiness = ["--ready-min-span", "1m", "--ready-min-flows", "1", "--ready-stable-for", "1m"]

    def works(second: int, source: dict[str, Any] = web) -> dict[str, Any]:
        minute, second = divmod(second, 60)
        time = f"2026-11-02T10:{20 + minute:02d}:{second:02d}Z"
        return flow_dict(source, api, verdict="FORWARDED", reason=None, time=time)

    def shadow(flows: list[dict[str, Any]]) -> dict[str, Any]:
        with fake_relay(responses_from_lines(jsonl(flows).splitlines())) as (_, address):
            ran = cpg(
                "shadow", "--server", address, "-d", str(out), "--duration", "1s",
                "--flush-interval", "0.2s", *readiness, "-o", "json",
            )  # fmt: skip
        assert ran.returncode in (0, 3), ran.stderr
        (profile,) = json.loads(ran.stdout)["readiness"]
        return profile

    brief = shadow([works(0), works(5)])
    assert not brief["ready"]
    assert brief["reasons"] == ["shadowed for 5 s with nothing breaking (needs 1 m)"]
    assert shadow([works(0), works(120)])["ready"]
    broke = shadow([works(0), works(90, scraper), works(120)])
    # by the newest flow of the flush that counted it (here, the only flush)
    assert not broke["ready"] and broke["reasons"] == [
        "the shadow run saw a flow its policy would drop by 2026-11-02T10:22:00Z, 0 s before its "
        "newest flow (needs 1 m without one)"
    ]
    planned = cpg("plan", str(learned), "-d", str(out), *readiness, "-o", "json")
    assert json.loads(planned.stdout)["readiness"][0]["ready"]  # the evidence alone: ready
