"""Every real capture, every option, no traceback (issue 42): each capture of
``../shared/corpus`` (raw, and as a default-deny cluster would have dropped it), the test
fixtures and the example, through every command that reads captures or policies, under every
option that changes the flow path. Each run ends with its documented exit code (an
exception fails the test: the commands run in process); ``-j 2`` writes what ``-j 1`` writes
byte for byte (without evidence, which does not change the policies); ``verify`` admits what
``replay`` wrote; ``lint`` is clean on cpg's output; ``plan`` on learned output names only
traffic whose peer identity is unknown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import CORPUS, EXAMPLE, ROOT, cpg, policies

FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*.jsonl"))
RAW = sorted(CORPUS.glob("*.json*")) if CORPUS.exists() else []
CAPTURES = [*(("raw", p) for p in RAW), *(("denied", p) for p in RAW)]
CAPTURES += [("fixture", p) for p in [*FIXTURES, EXAMPLE]]
OPTIONS = {
    "plain": (),
    "l7": ("--l7",),
    "learn": ("--learn", "forwarded"),
    "learn-l7": ("--learn", "forwarded", "--l7"),
    "audit": ("--include-audit",),
}
CHECK = {"plain": (), "l7": (), "learn": ("--learn", "forwarded"), "audit": ("--include-audit",)}
CHECK["learn-l7"] = CHECK["learn"]


def _denied(path: Path, into: Path) -> Path:
    """The capture as a default-deny cluster would have recorded it: every FORWARDED flow
    that is not a reply a POLICY_DENIED drop."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            lines.append(line)  # the example's malformed lines stay malformed
            continue
        flow = record.get("flow", record) if isinstance(record, dict) else None
        if (
            isinstance(flow, dict)
            and flow.get("verdict") == "FORWARDED"
            and not flow.get("is_reply")
        ):
            flow["verdict"] = "DROPPED"
            flow["drop_reason_desc"] = "POLICY_DENIED"
        lines.append(json.dumps(record))
    out = into / f"denied-{path.name}"
    out.write_text("\n".join(lines) + "\n")
    return out


def _json(ran: Any, *codes: int) -> dict[str, Any]:
    assert ran.returncode in codes, (ran.returncode, ran.stderr[-2000:])
    loaded: dict[str, Any] = json.loads(ran.stdout)
    return loaded


def _subject(traffic: str) -> tuple[str, str] | None:
    """The two ends of a ``why`` traffic line when both are NS/WORKLOAD."""
    match = re.match(r"^\S+\s+(\S+/\S+) → (\S+/\S+) ", traffic)
    return (match.group(1), match.group(2)) if match else None


@pytest.mark.skipif(not RAW, reason="../shared/corpus is absent")
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("kind,path", CAPTURES, ids=[f"{k}-{p.name}" for k, p in CAPTURES])
def test_every_capture_every_option(kind: str, path: Path, option: str, tmp_path: Path) -> None:
    capture = _denied(path, tmp_path) if kind == "denied" else path
    flags = OPTIONS[option]
    out, evidence = tmp_path / "p", tmp_path / "e"
    replayed = _json(
        cpg(
            "replay",
            str(capture),
            "-d",
            str(out),
            "--evidence-dir",
            str(evidence),
            "-j",
            "1",
            "-o",
            "json",
            *flags,
        ),
        0,
    )
    two = tmp_path / "p2"
    _json(
        cpg(
            "replay", str(capture), "-d", str(two), "--no-evidence", "-j", "2", "-o", "json", *flags
        ),
        0,
    )
    assert policies(two) == policies(out), "-j 2 wrote other policies than -j 1"
    written = sorted(out.rglob("*.yaml"))
    if written:
        linted = _json(cpg("lint", str(out), "-o", "json"), 0)
        assert linted["findings"] == []
    checked = _json(
        cpg("verify", str(capture), "-d", str(out), "-o", "json", *CHECK[option]), 0, 3, 4
    )
    # every flow checked is admitted; with none to check, verify cannot judge (exit 4)
    assert checked["passed"] is True or not written or not checked["checks"], checked
    assert checked["verdict"] != "failed", checked
    planned = cpg(
        "plan", str(capture), "-d", str(out), "--evidence-dir", str(evidence), "-o", "json"
    )
    plan = _json(planned, 0, 3, 4)
    if option.startswith("learn") and kind == "raw":
        unknown = [b for b in plan["would_break"] if not b["fix"].startswith("cannot judge")]
        assert unknown == [], [b["traffic"]["sample"] for b in unknown]
    (tmp_path / "plan.json").write_text(planned.stdout)
    for fmt in ("markdown", "html"):
        report = cpg(
            "report",
            "-d",
            str(out),
            "--evidence-dir",
            str(evidence),
            "--plan",
            str(tmp_path / "plan.json"),
            "-o",
            fmt,
        )
        assert report.returncode == 0, report.stderr
    why = _json(cpg("why", str(capture), "-d", str(out), "-o", "json"), 0, 3)
    ends = next((e for a in why["answers"] if (e := _subject(a["traffic"]))), None)
    if ends is not None:
        _json(
            cpg(
                "trace",
                "--from",
                ends[0],
                "--to",
                ends[1],
                "--port",
                "80/TCP",
                "-d",
                str(out),
                "-o",
                "json",
            ),
            0,
            3,
        )
    _json(
        cpg("drift", str(capture), "-d", str(out), "--evidence-dir", str(evidence), "-o", "json"),
        0,
        3,
        4,
    )
    if written:
        first = written[0]
        target = f"{first.parent.name}/{first.stem}"
        shown = cpg("explain", target, "-d", str(out), "--evidence-dir", str(evidence))
        assert shown.returncode == 0, shown.stderr
    assert replayed["exit_code"] == 0
