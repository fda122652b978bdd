"""Memory under pod churn: ``python benchmarks/churn.py [N] [--workloads W] [--old OTHER_CPG]``.

Writes three captures of N policy-denied flows (default 300,000) between W workloads (default
20) that differ only in their pods:

- ``still``: one pod per workload, always the same name and IP;
- ``pool``: 1,000 pods per workload that stay (a large, steady cluster: what the caches are for);
- ``churn``: every flow a new pod name and IP at both ends (rolling deploys, jobs, autoscaling).

Runs ``cpg replay`` on each (one process each, its own peak RSS from wait4) and prints flows/s,
peak RSS and the ratio of each to ``still``; with ``--old`` another cpg runs the same captures
in the same run, alternating. The three captures must give the same policies (only the pods
differ, and policies select by labels): the script checks that too.
"""

from __future__ import annotations

import filecmp
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("still", "pool", "churn")
POOL = 1000
PORTS = (80, 443, 5432, 8080)


def _ip(number: int) -> str:
    return f"10.{(number >> 16) & 255}.{(number >> 8) & 255}.{number & 255}"


def _endpoint(workload: int, pod: int) -> str:
    namespace = f"team-{workload % 4}"
    return (
        f'{{"identity":{1000 + workload},"namespace":"{namespace}","labels":'
        f'["k8s:app=svc-{workload:02d}","k8s:io.kubernetes.pod.namespace={namespace}"],'
        f'"pod_name":"svc-{workload:02d}-{pod:08x}"}}'
    )


def generate(path: Path, count: int, workloads: int, mode: str, seed: int = 7) -> None:
    """The same workloads, ports, times and directions in every mode; only pods differ."""
    rng = random.Random(seed)
    with path.open("w") as out:
        for i in range(count):
            source = rng.randrange(workloads)
            destination = (source + 1 + rng.randrange(3)) % workloads
            pick = rng.randrange(POOL), rng.randrange(POOL)
            if mode == "still":
                pods = (0, 0)
            elif mode == "pool":
                pods = pick
            else:
                pods = (2 * i + 1, 2 * i + 2)
            source_ip = _ip(source * POOL + pods[0] if mode != "churn" else pods[0])
            destination_ip = _ip(destination * POOL + pods[1] if mode != "churn" else pods[1])
            t = f"2026-11-02T10:{(i // 60000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}123456Z"
            direction = "INGRESS" if i % 2 else "EGRESS"
            out.write(
                f'{{"flow":{{"time":"{t}","verdict":"DROPPED","drop_reason":133,'
                f'"drop_reason_desc":"POLICY_DENIED","IP":{{"source":"{source_ip}",'
                f'"destination":"{destination_ip}","ipVersion":"IPv4"}},"l4":{{"TCP":'
                f'{{"source_port":{30000 + i % 30000},"destination_port":'
                f'{PORTS[destination % 4]},"flags":{{"SYN":true}}}}}},'
                f'"source":{_endpoint(source, pods[0])},'
                f'"destination":{_endpoint(destination, pods[1])},"Type":"L3_L4",'
                f'"node_name":"node-{i % 12}","traffic_direction":"{direction}",'
                f'"is_reply":false}},"node_name":"node-{i % 12}","time":"{t}"}}\n'
            )


def replay(cpg: str, capture: Path, work: Path) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of one ``cpg replay`` into a fresh folder."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with (work / "out.txt").open("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [cpg, "replay", str(capture), "-d", str(work / "p"), "--no-evidence"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NO_COLOR": "1"},
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            out.seek(0)
            sys.exit(f"{cpg} replay {capture} failed:\n{out.read()}")
    return seconds, usage.ru_maxrss / 1024


def _same_tree(left: Path, right: Path) -> bool:
    compared = filecmp.dircmp(left, right)
    if compared.left_only or compared.right_only or compared.diff_files:
        return False
    return all(_same_tree(left / name, right / name) for name in compared.common_dirs)


def main() -> None:
    args = sys.argv[1:]
    workloads = 20
    builds = [("this cpg", shutil.which("cpg") or str(Path(sys.executable).with_name("cpg")))]
    if "--workloads" in args:
        at = args.index("--workloads")
        workloads = int(args[at + 1])
        del args[at : at + 2]
    if "--old" in args:
        at = args.index("--old")
        builds.append(("old", args[at + 1]))
        del args[at : at + 2]
    count = int(args[0]) if args else 300_000
    with tempfile.TemporaryDirectory(prefix="cpg-churn-") as tmp:
        root = Path(tmp)
        for mode in MODES:
            generate(root / f"{mode}.jsonl", count, workloads, mode)
        os.sync()
        print(f"{count:,} policy-denied flows over {workloads} workloads, one replay each")
        result: dict[tuple[str, str], tuple[float, float]] = {}
        for mode in MODES:
            for label, cpg in builds:
                work = root / f"{label.replace(' ', '-')}-{mode}"
                result[label, mode] = replay(cpg, root / f"{mode}.jsonl", work)
        for label, _ in builds:
            still_s, still_mb = result[label, "still"]
            for mode in MODES:
                seconds, mb = result[label, mode]
                print(
                    f"{label:<8} {mode:<5}: {count / seconds:>9,.0f} flows/s ({seconds:.2f} s), "
                    f"peak RSS {mb:6.1f} MB, {mb / still_mb:.2f}x still's, "
                    f"time {seconds / still_s:.2f}x still's"
                )
            for mode in MODES[1:]:
                same = _same_tree(
                    root / f"{label.replace(' ', '-')}-still" / "p",
                    root / f"{label.replace(' ', '-')}-{mode}" / "p",
                )
                print(
                    f"{label:<8} {mode:<5}: policies {'equal to' if same else 'DIFFER from'} still's"
                )


if __name__ == "__main__":
    main()
