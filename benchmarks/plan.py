"""``cpg plan`` throughput: ``python benchmarks/plan.py [N]`` (default 1,000,000).

Generates N all-verdict jsonpb lines with benchmarks/replay.py's generator (40 namespaces × 25
workloads: 1,000 policy targets; 10 % forwarded, 5 % replies, 5 % infra drops), makes the
proposal with ``cpg replay``, then times ``cpg plan`` over the same capture and prints flows/s,
the child's peak RSS, the policy count and the plan's totals. ``--cpg PATH`` picks the build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from replay import generate


def run(command: list[str]) -> tuple[float, float, str]:
    """Seconds, the child's own peak RSS in MB (wait4) and its stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            command, stdout=out, stderr=err, env={**os.environ, "NO_COLOR": "1"}
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        out.seek(0)
        if code not in (0, 3):
            sys.exit(f"{' '.join(command[:2])} failed ({code}):\n{err.read().decode()}")
        return seconds, usage.ru_maxrss / 1024, out.read().decode()


def main() -> None:
    args = sys.argv[1:]
    cpg = str(Path(sys.executable).with_name("cpg"))
    if "--cpg" in args:
        at = args.index("--cpg")
        cpg = args[at + 1]
        del args[at : at + 2]
    count = int(args[0]) if args else 1_000_000
    with tempfile.TemporaryDirectory(prefix="cpg-plan-bench-") as tmp:
        root = Path(tmp)
        capture = root / "all.jsonl"
        size = generate(capture, count)
        print(f"generated {count:,} flows, {size / count:.0f} bytes/line on average")
        policies = root / "policies"
        seconds, rss, _ = run(
            [cpg, "replay", str(capture), "-d", str(policies), "--evidence-dir", str(root / "e")]
        )
        written = sum(1 for _ in policies.rglob("*.yaml"))
        print(f"replay (the proposal): {written:,} policies in {seconds:.2f} s")
        seconds, rss, out = run(
            [
                cpg,
                "plan",
                str(capture),
                "-d",
                str(policies),
                "--evidence-dir",
                str(root / "e"),
                "-o",
                "json",
            ]
        )
        plan = json.loads(out)
        print(
            f"plan: {count / seconds:,.0f} flows/s ({seconds:.2f} s), peak RSS {rss:.1f} MB; "
            f"{plan['candidates']:,} candidates, {plan['fixed']:,} fixed, "
            f"{plan['forwarded_flows']:,} forwarded, {plan['would_break_flows']:,} would break, "
            f"{len(plan['newly_enforced'])} newly enforced"
        )


if __name__ == "__main__":
    main()
