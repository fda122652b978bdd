"""Every command cpg prints under "Next steps" runs as printed: after a replay of one file, a
folder, several files (one with a space in its name), standard input and a learning run,
and after a live ``cpg generate``. They printed ``cpg verify 2 files (a.json, b.json)``,
``cpg plan CAPTURE-WITH-EVERY-VERDICT`` after a capture with every verdict, and
"Evidence in …" when nothing was written."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import CPG, EXAMPLE, cpg, endpoint, flow_dict, jsonl, wait_for
from fake_relay import FakeRelay, example_responses, fake_relay

PLACEHOLDER = re.compile(r"\b[A-Z][A-Z-]{3,}\b")
"""A word in capitals standing for something the reader must fill in (CAPTURE, NAMESPACE)."""


def next_steps(text: str) -> list[tuple[str, str]]:
    """(label, what follows it) for each line of the Next steps block."""
    lines = text.splitlines()
    start = lines.index("Next steps:") + 1
    steps = []
    for line in lines[start:]:
        if not line.startswith("  ") or ":" not in line:
            break
        label, rest = line.strip().split(":", 1)
        steps.append((label, rest.strip().split("   (")[0]))
    assert steps, text
    return steps


def run_each(
    steps: list[tuple[str, str]], cwd: Path, relay: str = "", served: FakeRelay | None = None
) -> list[str]:
    """Run every cpg command as printed (kubectl ones need a cluster: their folder must
    exist); the commands run, in order."""
    ran = []
    for label, command in steps:
        words = shlex.split(command)
        if words[0] == "kubectl":
            assert (cwd / words[-1]).exists(), command
            continue
        if words[0] != "cpg":  # a sentence, not a command: nothing to fill in
            assert not PLACEHOLDER.search(command), command
            continue
        assert not PLACEHOLDER.search(command), command
        if words[1] == "shadow":
            assert served is not None
            _shadow(words, cwd, relay, served)
        else:
            done = cpg(*words[1:], cwd=cwd)
            assert done.returncode in (0, 3), (label, command, done.stderr)
        ran.append(command)
    return ran


def _shadow(words: list[str], cwd: Path, relay: str, served: FakeRelay) -> None:
    """``cpg shadow --server RELAY … --duration 10m`` as printed, stopped (Ctrl+C) once the
    relay has its request: it says what it judged."""
    assert words[words.index("--server") + 1] == relay
    asked = len(served.requests)
    proc = subprocess.Popen(
        [CPG, *words[1:]], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert wait_for(lambda: len(served.requests) > asked or proc.poll() is not None, 120)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (0, 3, 4), err
    assert "shadow of" in err, out + err


def _replayed(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    done = cpg("replay", *args, cwd=cwd, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLE, tmp_path / "drops.jsonl")
    return tmp_path


def test_after_a_replay_of_one_file(workdir: Path) -> None:
    text = _replayed(workdir, "drops.jsonl", "-d", "policies", "--evidence-dir", "ev")
    steps = dict(next_steps(text))
    assert steps["check"] == "cpg verify drops.jsonl -d policies"
    # the example has forwarded flows: plan judges on it
    assert steps["plan"] == "cpg plan drops.jsonl -d policies --evidence-dir ev"
    assert len(run_each(next_steps(text), workdir)) == 3


def test_after_a_replay_of_a_folder_and_of_several_files(workdir: Path) -> None:
    folder = workdir / "captures"
    folder.mkdir()
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    (folder / "a.jsonl").write_text("".join(lines[:30]))
    (folder / "b.jsonl").write_text("".join(lines[30:]))
    shutil.copy(folder / "b.jsonl", workdir / "second part.jsonl")
    text = _replayed(workdir, "captures", "-d", "from-folder")
    assert dict(next_steps(text))["check"] == "cpg verify captures -d from-folder"
    run_each(next_steps(text), workdir)

    text = _replayed(workdir, "captures/a.jsonl", "second part.jsonl", "-d", "out dir")
    steps = dict(next_steps(text))
    assert steps["check"] == "cpg verify captures/a.jsonl 'second part.jsonl' -d 'out dir'"
    assert len(run_each(next_steps(text), workdir)) == 3


def test_after_a_replay_of_standard_input(workdir: Path) -> None:
    text = _replayed(workdir, "-", "-d", "policies", stdin=EXAMPLE.read_bytes())
    steps = dict(next_steps(text))
    assert steps["check"].startswith("keep the flows in a file")
    assert len(run_each(next_steps(text), workdir)) == 1  # explain; verify needs a file


def test_after_a_capture_of_drops_only_and_after_learning(workdir: Path) -> None:
    drops = [line for line in EXAMPLE.read_text().splitlines() if '"DROPPED"' in line]
    (workdir / "only-drops.jsonl").write_text("\n".join(drops) + "\n")
    text = _replayed(workdir, "only-drops.jsonl", "-d", "policies", "--no-evidence")
    steps = dict(next_steps(text))
    assert steps["plan"].startswith("this capture holds only drops")
    assert "explain" not in steps  # no evidence was recorded
    assert run_each(next_steps(text), workdir) == ["cpg verify only-drops.jsonl -d policies"]

    web, api = endpoint("shop", "web"), endpoint("shop", "api")
    works = [flow_dict(web, api, tcp=8080, verdict="FORWARDED", reason=None)]
    (workdir / "works.jsonl").write_text(jsonl(works))
    text = _replayed(workdir, "works.jsonl", "-d", "learned", "--learn", "forwarded")
    steps = dict(next_steps(text))
    assert steps["check"] == "cpg verify works.jsonl -d learned --learn forwarded"
    assert len(run_each(next_steps(text), workdir)) == 3


def test_a_replay_that_writes_nothing_names_no_evidence(workdir: Path) -> None:
    web, api = endpoint("shop", "web"), endpoint("shop", "api")
    works = [flow_dict(web, api, tcp=8080, verdict="FORWARDED", reason=None)]
    (workdir / "works.jsonl").write_text(jsonl(works))
    text = _replayed(workdir, "works.jsonl", "-d", "policies", "--evidence-dir", "ev")
    assert "Evidence in" not in text and "Next steps" not in text
    learn = next(line for line in text.splitlines() if "learn from today's traffic" in line)
    command = learn.split(":", 1)[1].split(", then")[0].strip()
    assert command == "cpg replay works.jsonl --learn forwarded -d policies"
    assert cpg(*shlex.split(command)[1:], cwd=workdir).returncode == 0


def test_after_a_live_generate(tmp_path: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    with fake_relay(example_responses()) as (relay, address):
        done = subprocess.run(
            [CPG, "generate", "--server", address, "-d", "live", "--duration", "3s"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        text = done.stdout + done.stderr
        steps = dict(next_steps(text))
        assert steps["check"].startswith(f"cpg shadow --server {address} -d live")
        assert len(run_each(next_steps(text), tmp_path, relay=address, served=relay)) == 2
