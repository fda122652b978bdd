"""The aggregator's own throughput: ``python benchmarks/aggregate.py [N] [--vs SRC]``.

Generates N jsonpb lines with benchmarks/replay.py's generator, parses them once, and times
``Aggregator.add`` over the parsed flows and the plans at the end (the path of a live capture
and of every flow the quick reader leaves to the full parse), in child processes so that each
tree is measured alone: this tree, and with ``--vs SRC`` another checkout's ``src`` as well,
the two alternating (five rounds each), so that a busy machine weighs on both alike. Prints
each tree's best and median flows/s (process CPU time), its peak RSS, and the ratio.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from replay import generate

ROUNDS = 5
_CHILD = """
import json, resource, sys, time
from cpg_core import AggregateOptions, Aggregator
from cpg_core._flows.parse import FlowParser

parser = FlowParser()
flows = []
with open(sys.argv[1]) as lines:
    for line in lines:
        record = parser.parse(json.loads(line))
        flow = getattr(record, "flow", record)
        if hasattr(flow, "verdict"):
            flows.append(flow)
start = time.process_time()
aggregator = Aggregator(AggregateOptions())
for flow in flows:
    aggregator.add(flow)
plans = aggregator.plans()
seconds = time.process_time() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"flows": len(flows), "seconds": seconds, "plans": len(plans), "mb": peak}))
"""


def measure(src: Path, capture: Path) -> dict[str, float]:
    """One child: this interpreter with ``src`` first on its path."""
    ran = subprocess.run(
        [sys.executable, "-c", _CHILD, str(capture)],
        env={**os.environ, "PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(ran.stdout)  # type: ignore[no-any-return]


def main() -> None:
    args = sys.argv[1:]
    other: Path | None = None
    if "--vs" in args:
        at = args.index("--vs")
        other = Path(args[at + 1]).resolve()
        del args[at : at + 2]
    count = int(args[0]) if args else 200_000
    here = Path(__file__).resolve().parents[1] / "src"
    trees = {"this tree": here} | ({"--vs": other} if other is not None else {})
    with tempfile.TemporaryDirectory(prefix="cpg-aggregate-bench-") as tmp:
        capture = Path(tmp) / "capture.jsonl"
        generate(capture, count)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(ROUNDS):
            for name, src in trees.items():
                results[name].append(measure(src, capture))
    rates = {}
    for name, runs in results.items():
        per_second = [r["flows"] / r["seconds"] for r in runs]
        rates[name] = statistics.median(per_second)
        print(
            f"{name:>10}: {runs[0]['flows']:,} flows, {int(runs[0]['plans'])} plans, "
            f"best {max(per_second):,.0f} flows/s, median {rates[name]:,.0f} flows/s, "
            f"peak RSS {max(r['mb'] for r in runs):.0f} MB"
        )
    if other is not None:
        print(f"this tree / --vs, median flows/s: {rates['this tree'] / rates['--vs']:.2f}")


if __name__ == "__main__":
    main()
