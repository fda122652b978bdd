"""Every output cpg writes, as digests: run it with one tree's cpg, then another's, and
compare the two files to show a structural change left the outputs byte-identical.

    python scripts/output_fingerprints.py OUT.json [--cpg "PYTHON -m cpg_cli"] [--shared DIR]

On the example capture, the synthetic capture of 500 workloads and every capture of the
shared corpus: ``replay`` (plain and ``--l7``: its report and every file written, policies
and evidence), ``verify``, ``plan`` (text and JSON), ``why`` (JSON), ``lint`` (JSON), the
Markdown and HTML reports and a ``trace``. Each run works in the same absolute folder (the
evidence folder's name is a hash of the policy folder's path), emptied between runs; the
moments a run reads off the clock are masked.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path("/tmp/cpg-output-fingerprints")
MOMENT = re.compile(rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")
TODAY = datetime.now(UTC)


def _run_time(match: re.Match[bytes]) -> bytes:
    """A moment of the run itself (when it started and ended) reads the clock: within two
    days of now it is written as ``<run time>``; the captures' own times are kept."""
    text = match.group(0).decode()
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return b"<run time>" if abs(moment - TODAY) < timedelta(days=2) else match.group(0)


def _digest(data: bytes) -> str:
    return hashlib.sha256(MOMENT.sub(_run_time, data)).hexdigest()


def _files(folder: Path) -> dict[str, str]:
    if not folder.is_dir():
        return {}
    return {
        str(path.relative_to(WORK)): _digest(path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _captures(shared: Path) -> dict[str, Path]:
    found = {"example": ROOT / "examples/drops.jsonl"}
    synthetic = WORK.parent / "cpg-output-fingerprints-synthetic-500.jsonl"
    if not synthetic.is_file():
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks/synthetic.py"), "500", str(synthetic)],
            check=True,
            capture_output=True,
        )
    found["synthetic-500"] = synthetic
    corpus = shared / "corpus"
    if corpus.is_dir():
        for path in sorted(corpus.iterdir()):
            if path.suffix in (".json", ".jsonl"):
                found[path.stem] = path
    return found


def _runs(capture: Path) -> list[tuple[str, list[str]]]:
    plain, l7, evidence = "policies", "policies-l7", "evidence"
    common = ["--evidence-dir", evidence]
    return [
        ("replay", ["replay", str(capture), "-d", plain, *common, "-o", "json"]),
        ("replay-l7", ["replay", str(capture), "--l7", "-d", l7, *common, "-o", "json"]),
        ("verify", ["verify", str(capture), "-d", plain, *common, "-o", "json"]),
        ("plan-text", ["plan", str(capture), "-d", plain, *common]),
        ("plan-json", ["plan", str(capture), "-d", plain, *common, "-o", "json"]),
        ("why-json", ["why", str(capture), "-d", plain, *common, "-o", "json"]),
        ("lint-json", ["lint", plain, "-o", "json"]),
        ("report-markdown", ["report", "-d", plain, *common, "-o", "markdown"]),
        ("report-html", ["report", "-d", plain, *common, "-o", "html"]),
        (
            "trace",
            [
                *("trace", "-d", plain, *common),
                *("--from", "app-01/api", "--to", "app-01/db", "--port", "5432/TCP"),
            ],
        ),
    ]


def fingerprints(cpg: list[str], shared: Path) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for name, capture in _captures(shared).items():
        shutil.rmtree(WORK, ignore_errors=True)
        WORK.mkdir(parents=True)
        for run, arguments in _runs(capture):
            ran = subprocess.run([*cpg, *arguments], cwd=WORK, capture_output=True, check=False)
            out[f"{name}/{run}"] = {
                "exit": ran.returncode,
                "stdout": _digest(ran.stdout),
                "stderr": _digest(ran.stderr),
            }
        out[f"{name}/files"] = dict(_files(WORK))
    shutil.rmtree(WORK, ignore_errors=True)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--cpg", default=f"{sys.executable} -m cpg_cli")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    options = parser.parse_args(argv)
    found = fingerprints(shlex.split(options.cpg), options.shared)
    options.out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    print(f"{len(found)} outputs digested into {options.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
