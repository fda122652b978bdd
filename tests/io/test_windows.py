"""--since/--until (issue 14): RFC 3339 times or durations; for replay and explain a duration
counts back from the newest flow / evidence, for generate from now. Flows outside are counted."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import EXAMPLE, cpg, policies
from cpg_core._flows.attribution import time_key
from fake_relay import example_responses, fake_relay


def _flow_times() -> list[str]:
    """The time key of every flow record of the example (what the window is applied to)."""
    times = []
    for line in EXAMPLE.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        flow = record.get("flow") if isinstance(record, dict) else None
        if isinstance(flow, dict) and isinstance(flow.get("source", {}), dict):
            times.append(time_key(flow.get("time", "")))
    return times


def _replay(tmp_path: Path, name: str, *args: str) -> dict:
    out = tmp_path / name
    ran = cpg("replay", str(EXAMPLE), "-d", str(out), "--no-evidence", "-o", "json", *args)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_replay_window_with_rfc3339_times_counts_what_is_outside(tmp_path: Path) -> None:
    whole = _replay(tmp_path, "all")
    since, until = "2026-11-02T09:33:00Z", "2026-11-02T09:35:00.5Z"
    windowed = _replay(tmp_path, "window", "--since", since, "--until", until)
    flows = windowed["flows"]
    assert flows["total"] == whole["flows"]["total"]  # every flow is counted
    inside = [t for t in _flow_times() if time_key(since) <= t <= time_key(until)]
    assert 0 < len(inside) < flows["total"]
    assert flows["outside_window"] == flows["total"] - len(inside)
    assert flows["candidate"] < whole["flows"]["candidate"]


def test_replay_duration_counts_back_from_the_newest_flow(tmp_path: Path) -> None:
    newest = max(_flow_times())
    cutoff = datetime.fromisoformat(newest.replace("Z", "+00:00")) - timedelta(minutes=2)
    expected_inside = sum(1 for t in _flow_times() if t >= time_key(cutoff.isoformat()))
    report = _replay(tmp_path, "last2m", "--since", "2m")
    flows = report["flows"]
    assert flows["total"] - flows["outside_window"] == expected_inside
    assert expected_inside > 0, "the capture is a month old: counting from now would be empty"
    text = cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "t"), "--no-evidence", "--since", "2m")
    line = next(row for row in text.stdout.splitlines() if "outside the time window" in row)
    assert line.split()[-1] == str(flows["outside_window"])
    # the same window checks out with --verify
    verified = cpg(
        "replay",
        str(EXAMPLE),
        "-d",
        str(tmp_path / "v"),
        "--no-evidence",
        "--since",
        "2m",
        "--verify",
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_bad_windows_are_usage_errors(tmp_path: Path) -> None:
    for args, said in (
        (["--since", "yesterday"], "not an RFC 3339 time"),
        (["--since", "2026-11-03T00:00:00Z", "--until", "2026-11-02T00:00:00Z"], "ends before"),
        (["--until", "2026-13-45T00:00:00Z"], "not an RFC 3339 time"),
    ):
        ran = cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "p"), *args)
        assert ran.returncode == 2 and said in ran.stderr, (args, ran.stderr)
    piped = cpg("replay", "-", "--since", "2h", "-d", str(tmp_path / "p"), stdin=b"{}\n")
    assert piped.returncode == 1 and "standard input" in piped.stderr


def test_explain_since_counts_back_from_the_newest_evidence(tmp_path: Path) -> None:
    out, evidence = tmp_path / "policies", tmp_path / "evidence"
    assert (
        cpg("replay", str(EXAMPLE), "-d", str(out), "--evidence-dir", str(evidence)).returncode == 0
    )

    def rules(*args: str) -> list[dict]:
        ran = cpg(
            "explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence), "--json", *args
        )
        assert ran.returncode == 0, ran.stderr
        return json.loads(ran.stdout)["matched_rules"]

    every = rules()
    assert rules("--since", "2h") == every, "a month-old capture still answers --since 2h"
    newest = max(rule["last_seen"] for rule in every)
    recent = rules("--since", "1s")
    assert recent and all(rule["last_seen"] >= time_key(newest)[:19] for rule in recent)
    assert len(recent) < len(every)
    early = rules("--until", "2026-11-02T09:31:00Z")
    assert early and all(rule["first_seen"] <= "2026-11-02T09:31:00.000000000Z" for rule in early)
    assert rules("--since", "2030-01-01T00:00:00Z") == []


def test_generate_since_asks_the_relay_and_matches_replay(tmp_path: Path) -> None:
    since = "2026-11-02T09:34:00Z"
    replayed = tmp_path / "replayed"
    assert (
        cpg(
            "replay", str(EXAMPLE), "-d", str(replayed), "--no-evidence", "--since", since
        ).returncode
        == 0
    )
    with fake_relay(example_responses()) as (relay, address):
        live = tmp_path / "live"
        ran = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(live),
            "--no-evidence",
            "--since",
            since,
            "--duration",
            "1.5s",
        )
        assert ran.returncode == 0, ran.stderr
        (request, *_) = relay.requests
        assert request.HasField("since") and request.since.ToJsonString() == "2026-11-02T09:34:00Z"
    assert policies(live) == policies(replayed)
    future = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    past = cpg("generate", "--server", "127.0.0.1:9", "--until", future)
    assert past.returncode == 2 and "not a time in the future" in past.stderr
