"""Replay throughput: ``python benchmarks/replay.py [N]`` (default 1,000,000).

Generates N realistic jsonpb lines (~750 bytes; 40 namespaces × 25 workloads, each calling a
handful of services; 20 % are not candidates: forwarded, replies, infra drops), runs the
installed ``cpg replay`` on them as a subprocess, and prints flows/s, the child's peak RSS and
the ratio to plain ``json.loads`` of the same lines measured in the same run. It also times one
worker's whole job alone (read, decode, aggregate, pickle the partial result: what each of
``-j N`` workers does, without the start-up and the writing of the output stage), the
"per-worker" ratio.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _endpoint(rng: random.Random, ns: int, app: int) -> str:
    labels = [
        f"k8s:app=svc-{app:02d}",
        f"k8s:io.kubernetes.pod.namespace=team-{ns:02d}",
    ]
    return json.dumps(
        {
            "identity": 1000 + ns * 100 + app,
            "namespace": f"team-{ns:02d}",
            "labels": labels,
            "pod_name": f"svc-{app:02d}-{rng.randrange(16**5):05x}",
        },
        separators=(",", ":"),
    )


def generate(path: Path, count: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    endpoints = [[_endpoint(rng, ns, app) for app in range(25)] for ns in range(40)]
    # Like real traffic: every workload calls a handful of services on a few ports.
    calls = {
        (ns, app): [
            (
                rng.randrange(40) if rng.random() < 0.3 else ns,
                rng.randrange(25),
                rng.choice((80, 443, 5432, 6379, 8080, 8443, 9090, 9100)),
            )
            for _ in range(6)
        ]
        for ns in range(40)
        for app in range(25)
    }
    total = 0
    with path.open("w") as out:
        for i in range(count):
            sns, sapp = rng.randrange(40), rng.randrange(25)
            dns_, dapp, port = rng.choice(calls[(sns, sapp)])
            src = endpoints[sns][sapp]
            dst = endpoints[dns_][dapp]
            roll = rng.random()
            verdict, reason, reply = "DROPPED", "POLICY_DENIED", "false"
            if roll < 0.10:
                verdict, reason = "FORWARDED", ""
            elif roll < 0.15:
                reply = "true"
            elif roll < 0.20:
                reason = "CT_MAP_INSERTION_FAILED"
            direction = "INGRESS" if i % 2 else "EGRESS"
            t = f"2026-11-02T10:{(i // 60000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}123456Z"
            reason_part = f',"drop_reason_desc":"{reason}"' if reason else ""
            line = (
                f'{{"flow":{{"time":"{t}","uuid":"{rng.getrandbits(128):032x}",'
                f'"verdict":"{verdict}","drop_reason":133,'
                f'"IP":{{"source":"10.{sns}.{i % 250}.{i % 199}","destination":"10.{dns_}.3.4",'
                f'"ipVersion":"IPv4"}},"l4":{{"TCP":{{"source_port":{30000 + i % 30000},'
                f'"destination_port":{port},"flags":{{"SYN":true}}}}}},'
                f'"source":{src},"destination":{dst},"Type":"L3_L4","node_name":"node-{i % 12}",'
                f'"traffic_direction":"{direction}"'
                f'{reason_part},"is_reply":{reply}}},'
                f'"node_name":"node-{i % 12}","time":"{t}"}}\n'
            )
            total += len(line)
            out.write(line)
    return total


def time_json_loads(path: Path) -> float:
    start = time.perf_counter()
    with path.open("rb") as handle:
        for line in handle:
            json.loads(line)
    return time.perf_counter() - start


def run_replay(
    cpg: str, capture: Path, work: Path, extra: list[str] | None = None, *, fresh: bool = True
) -> tuple[float, float, str]:
    """One ``cpg replay`` into a fresh folder (or, ``fresh=False``, into the folder the last
    run wrote: a rerun): seconds, that child's own peak RSS (MB, from wait4) and the report's
    last line."""
    if fresh:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    with (work / "out.txt").open("w+") as out, (work / "err.txt").open("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [
                cpg,
                "replay",
                str(capture),
                "-d",
                str(work / "policies"),
                "--evidence-dir",
                str(work / "evidence"),
                *(extra or []),
            ],
            stdout=out,
            stderr=err,
            env={**os.environ, "NO_COLOR": "1"},
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            sys.exit(f"{cpg} replay failed ({proc.returncode}):\n{err.read()}")
        out.seek(0)
        last = out.read().strip().splitlines()[-1]
    return seconds, usage.ru_maxrss / 1024, last


# One worker's whole job, in the interpreter of the build being measured: read the file,
# decode, aggregate, and hand back the pickled partial result (what a -j N worker sends).
_WORKER_STAGE = """
import pickle, sys, time
from cpg_core import AggregateOptions
from cpg_io.engines.workers import aggregate_stream
from cpg_io.sources import ReadStats, open_flow_stream
start = time.perf_counter()
with open_flow_stream(sys.argv[1]) as stream:
    aggregator = aggregate_stream(
        stream, AggregateOptions(max_samples=int(sys.argv[2])), ReadStats(), 1
    )
# what that build's workers hand back (hand_over, where it exists, does not copy)
partial = pickle.dumps(getattr(aggregator, "hand_over", aggregator.state)())
print(time.perf_counter() - start, aggregator.total_flows)
"""


def run_worker_stage(cpg: str, capture: Path, samples: int) -> float:
    """Seconds one worker of that build takes on the capture (its interpreter is the one
    next to its ``cpg``)."""
    python = str(Path(cpg).with_name("python"))
    out = subprocess.run(
        [python, "-c", _WORKER_STAGE, str(capture), str(samples)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return float(out[0])


def main() -> None:
    """``replay.py [N] [--compare OTHER_CPG] [--rounds K] [-j N] [--no-evidence] [--rerun]``:
    with --compare, the other cpg (an older build) runs the same capture in the same run,
    alternating, best of K rounds each. ``-j 1`` measures one worker against the json.loads
    floor of the same lines (the per-worker ratio). ``--rerun`` also times a second replay of
    the same capture into the same folders (what a nightly job or a CI gate does)."""
    args = sys.argv[1:]
    other = None
    rounds = 1
    if "--compare" in args:
        at = args.index("--compare")
        other = args[at + 1]
        del args[at : at + 2]
        rounds = 3
    if "--rounds" in args:
        at = args.index("--rounds")
        rounds = int(args[at + 1])
        del args[at : at + 2]
    extra: list[str] = []
    if "-j" in args:
        at = args.index("-j")
        extra += ["-j", args[at + 1]]
        del args[at : at + 2]
    if "--no-evidence" in args:
        args.remove("--no-evidence")
        extra.append("--no-evidence")
    rerun = "--rerun" in args
    if rerun:
        args.remove("--rerun")
    count = int(args[0]) if args else 1_000_000
    cpg = shutil.which("cpg") or str(Path(sys.executable).with_name("cpg"))
    with tempfile.TemporaryDirectory(prefix="cpg-bench-") as tmp:
        capture = Path(tmp) / "flows.jsonl"
        size = generate(capture, count)
        os.sync()  # the capture's own writeback must not be timed as cpg's
        print(f"generated {count:,} flows, {size / count:.0f} bytes/line on average")
        loads_s = time_json_loads(capture)
        print(f"json.loads only : {count / loads_s:>12,.0f} lines/s ({loads_s:.2f} s)")
        if extra:
            print(f"cpg replay flags: {' '.join(extra)}")
        binaries = [("this cpg", cpg)] + ([("compared", other)] if other else [])
        best: dict[str, float] = {}
        stage: dict[str, float] = {}
        again: dict[str, float] = {}
        peak: dict[str, float] = {}
        last = ""
        samples = 0 if "--no-evidence" in extra else 10
        for _ in range(rounds):
            for label, binary in binaries:
                seconds, rss, last = run_replay(
                    binary, capture, Path(tmp) / label.replace(" ", "-"), extra
                )
                best[label] = min(best.get(label, seconds), seconds)
                peak[label] = max(peak.get(label, 0.0), rss)
                if rerun:
                    seconds, rss, last = run_replay(
                        binary, capture, Path(tmp) / label.replace(" ", "-"), extra, fresh=False
                    )
                    again[label] = min(again.get(label, seconds), seconds)
                seconds = run_worker_stage(binary, capture, samples)
                stage[label] = min(stage.get(label, seconds), seconds)
            loads_s = min(loads_s, time_json_loads(capture))  # the floor, as noisy as the rest
        for label, _binary in binaries:
            seconds = best[label]
            print(
                f"{label:<9} replay: {count / seconds:>12,.0f} flows/s ({seconds:.2f} s, best of "
                f"{rounds}), ratio to json.loads {loads_s / seconds:.2f}, peak RSS "
                f"{peak[label]:,.1f} MB"
            )
        for label, _binary in binaries:
            if label in again:
                seconds = again[label]
                print(
                    f"{label:<9} rerun : {count / seconds:>12,.0f} flows/s ({seconds:.2f} s, best "
                    f"of {rounds}; the same capture into the same folders), ratio to json.loads "
                    f"{loads_s / seconds:.2f}"
                )
        for label, _binary in binaries:
            seconds = stage[label]
            print(
                f"{label:<9} worker : {count / seconds:>12,.0f} flows/s ({seconds:.2f} s, best of "
                f"{rounds}; read, decode, aggregate, pickle the partial), ratio to json.loads "
                f"{loads_s / seconds:.2f}"
            )
        print(f"json.loads best : {count / loads_s:>12,.0f} lines/s ({loads_s:.2f} s)")
        if other:
            print(f"this/compared throughput: {best['compared'] / best['this cpg']:.2f}")
            if rerun:
                print(f"this/compared rerun     : {again['compared'] / again['this cpg']:.2f}")
            print(f"this/compared per worker: {stage['compared'] / stage['this cpg']:.2f}")
        print(last)


if __name__ == "__main__":
    main()
