"""Replay on Dask against the local engine: ``python benchmarks/dask_replay.py [N] [-j J]``
(1,000,000 flows; J = 2).

Generates N realistic lines (the generator of benchmarks/replay.py) in one plain file, then
runs the installed ``cpg replay`` on it with ``-j J`` and with ``--engine dask --scheduler
local:J`` (a LocalCluster of J worker processes, its start-up included), both without
evidence, alternating, best of K rounds (``--rounds K``, default 2). Then it measures, in this
process, the inputs of the cost model in docs/scale-out.md: a worker's read-and-aggregate rate
on its first part and on its second (warm), the size of its partial result (pickled), and the
time to merge two partials in the client.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cpg_core import AggregateOptions
from cpg_io.engines import dask as dask_engine
from replay import generate


def run(cpg: str, capture: Path, out: Path, extra: list[str]) -> float:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    subprocess.run(
        [cpg, "replay", str(capture), "-d", str(out), "--no-evidence", "-q", *extra],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )
    return time.perf_counter() - start


def model_inputs(capture: Path) -> None:
    from cpg_core import Aggregator

    options = AggregateOptions(max_samples=10)
    parts = dask_engine.plan_parts([str(capture)], dask_engine.RANGE_BYTES)
    rates = []
    for part in parts[:2]:  # one worker thread's first part (cold), then its second (warm)
        start = time.perf_counter()
        receipt = dask_engine.replay_part(part, options, "bench")
        rates.append((receipt.flows, time.perf_counter() - start))
    (first,) = dask_engine.collect("bench")
    for part in parts[2:4]:  # another worker thread's two parts
        dask_engine.replay_part(part, options, "bench-other")
    (other,) = dask_engine.collect("bench-other")
    pickled = pickle.dumps(first)
    size = len(pickled)
    # As the client does: each worker's partial arrives pickled and is absorbed as its own.
    arrived = [pickle.loads(pickled).state, pickle.loads(pickle.dumps(other)).state]
    start = time.perf_counter()
    merged = Aggregator(options)
    for state in arrived:
        merged.absorb(state, own=True)
    merge_s = time.perf_counter() - start
    entries = sum(len(atoms) for atoms in first.state.atoms.values())
    for label, (flows, seconds) in zip(("first (cold)", "second (warm)"), rates, strict=False):
        print(
            f"{label} part of a worker ({parts[0].stop or 0:,} bytes): {flows:,} flows in "
            f"{seconds:.2f} s = {flows / seconds:,.0f} flows/s (with evidence samples)"
        )
    print(
        f"a worker's partial after {len(rates)} parts: {size / 1e6:.1f} MB pickled for "
        f"{len(first.state.atoms):,} policies, {entries:,} allow entries "
        f"({size / max(entries, 1):,.0f} bytes per entry)"
    )
    print(f"merging two workers' partials in the client: {merge_s * 1000:.0f} ms")


def main() -> None:
    args = sys.argv[1:]
    jobs = 2
    rounds = 2
    if "-j" in args:
        at = args.index("-j")
        jobs = int(args[at + 1])
        del args[at : at + 2]
    if "--rounds" in args:
        at = args.index("--rounds")
        rounds = int(args[at + 1])
        del args[at : at + 2]
    count = int(args[0]) if args else 1_000_000
    cpg = shutil.which("cpg") or str(Path(sys.executable).with_name("cpg"))
    with tempfile.TemporaryDirectory(prefix="cpg-dask-bench-") as tmp:
        capture = Path(tmp) / "flows.jsonl"
        size = generate(capture, count)
        os.sync()
        print(f"generated {count:,} flows, {size / 1e6:,.0f} MB, {size / count:.0f} bytes/line")
        best: dict[str, float] = {}
        runs = {
            f"local -j {jobs}": ["-j", str(jobs)],
            f"dask local:{jobs}": ["--engine", "dask", "--scheduler", f"local:{jobs}"],
        }
        for _ in range(rounds):
            for label, extra in runs.items():
                seconds = run(cpg, capture, Path(tmp) / "out", extra)
                best[label] = min(best.get(label, seconds), seconds)
        for label, seconds in best.items():
            print(
                f"{label:<13}: {count / seconds:>10,.0f} flows/s ({seconds:.2f} s, best of {rounds})"
            )
        local, dask = best[f"local -j {jobs}"], best[f"dask local:{jobs}"]
        print(f"dask/local throughput: {local / dask:.2f}")
        model_inputs(capture)


if __name__ == "__main__":
    main()
