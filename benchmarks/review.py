"""The review commands against the replay that wrote the folder they read:
``python benchmarks/review.py [SIZES…] [--old CPG] [--runs N]``.

For each size (workloads of ``benchmarks/synthetic.py``; default 500 and 2000), writes the
capture, replays it into a folder, then times ``why`` over the capture, ``verify``, ``plan``,
``lint`` of the folder and one ``trace``, each a whole process (what a user waits for), and
prints seconds, peak RSS and the ratio to the replay. ``--old CPG`` runs a second cpg (another
checkout's ``.venv/bin/cpg``) on the same inputs interleaved with this one, so a busy machine
slows both alike. The medians of ``--runs`` runs are shown (default 3).
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from synthetic import synthetic_capture  # noqa: E402

TRACE = ("--from", "app-01/web", "--to", "app-01/api", "--port", "8080/TCP")


def commands(cpg: str, capture: Path, folder: Path) -> dict[str, list[str]]:
    """What each command runs (the folder the replay wrote, the capture it read)."""
    return {
        "replay": [cpg, "replay", str(capture), "-d", str(folder), "-q"],
        "why": [cpg, "why", str(capture), "-d", str(folder)],
        "verify": [cpg, "verify", str(capture), "-d", str(folder)],
        "plan": [cpg, "plan", str(capture), "-d", str(folder)],
        "lint": [cpg, "lint", str(folder)],
        "trace": [cpg, "trace", "-d", str(folder), *TRACE],
    }


def timed(argv: list[str]) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of one whole process; its output is discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 3, 4):
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-400:]!r}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024


def measure(size: int, cpgs: dict[str, str], runs: int, work: Path) -> None:
    capture = synthetic_capture(work / f"syn{size}.jsonl", size)
    times: dict[tuple[str, str], list[float]] = {}
    for run in range(runs):
        for label, cpg in cpgs.items():
            folder = work / f"{label}-{size}-{run}"
            for name, argv in commands(cpg, capture, folder).items():
                seconds, _ = timed(argv)
                times.setdefault((label, name), []).append(seconds)
    print(f"\n{size} workloads ({sum(1 for _ in capture.open()):,} flows), medians of {runs}:")
    for label in cpgs:
        replay = statistics.median(times[(label, "replay")])
        cells = []
        for name in ("replay", "why", "verify", "plan", "lint", "trace"):
            seconds = statistics.median(times[(label, name)])
            cells.append(f"{name} {seconds:6.2f} s ({seconds / replay:4.1f}x)")
        print(f"  {label:>4}: " + "  ".join(cells))


def main(argv: list[str]) -> int:
    cpgs = {"new": str(Path(sys.executable).parent / "cpg")}
    runs = 3
    rest = list(argv)
    if "--old" in rest:
        at = rest.index("--old")
        cpgs["old"] = rest[at + 1]
        del rest[at : at + 2]
    if "--runs" in rest:
        at = rest.index("--runs")
        runs = int(rest[at + 1])
        del rest[at : at + 2]
    sizes = [int(a) for a in rest if a.isdigit()] or [500, 2000]
    with tempfile.TemporaryDirectory(prefix="cpg-review-") as work:
        for size in sizes:
            measure(size, cpgs, runs, Path(work))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
