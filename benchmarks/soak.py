"""A live session for minutes, with a relay restart in the middle:
``python benchmarks/soak.py [MINUTES [FLOWS_PER_SECOND]]`` (11 minutes, 400 flows/s).

A relay on 127.0.0.1 (a real gRPC server, cpg's own stubs) streams policy-denied flows between
20 workloads at the given rate, every flow from and to a pod never seen before (pod churn: a
rolling deploy that never ends), timed as they are sent. Halfway it stops (a Hubble Relay
restart), stays away 10 s, and comes back on the same port, resuming from the ``since`` cpg
asks for. The installed ``cpg generate`` follows it with ``--metrics-addr``; this script
polls ``/readyz`` four times a second and the resident memory of cpg's processes every 10 s.

At the end it replays exactly the flows the relay sent (as ``hubble observe -o jsonpb`` would
have written them) with ``cpg replay`` and compares the two policy folders byte for byte.
Prints: flows sent, how long after the relay came back cpg was ready again (against the
flush interval), memory by minute (flat or not), and whether the folders are identical.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from cpg_io._proto.flow import flow_pb2
from cpg_io._proto.observer import observer_pb2, observer_pb2_grpc

WORKLOADS = 20
PORTS = (80, 443, 5432, 8080)
FLUSH_SECONDS = 5


class Stream:
    """Flow ``i`` is sent at ``start + i / rate`` and carries that time."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.start_ns = time.time_ns()
        self.sent = 0
        """Flows sent so far (the highest index + 1)."""

    def flow(self, i: int) -> Any:
        response = observer_pb2.GetFlowsResponse()
        f = response.flow
        f.time.FromNanoseconds(self.start_ns + i * 1_000_000_000 // self.rate)
        f.verdict = flow_pb2.DROPPED
        f.drop_reason_desc = flow_pb2.POLICY_DENIED
        f.traffic_direction = flow_pb2.INGRESS if i % 2 else flow_pb2.EGRESS
        source = i * 7 % WORKLOADS
        destination = (source + 1 + i % 3) % WORKLOADS
        for end, workload, pod in (
            (f.source, source, 2 * i),
            (f.destination, destination, 2 * i + 1),
        ):
            namespace = f"team-{workload % 4}"
            end.namespace = namespace
            end.identity = 1000 + workload
            end.labels.extend(
                [f"k8s:app=svc-{workload:02d}", f"k8s:io.kubernetes.pod.namespace={namespace}"]
            )
            end.pod_name = f"svc-{workload:02d}-{pod:08x}"
        f.IP.source = f"10.{(2 * i >> 16) & 255}.{(2 * i >> 8) & 255}.{2 * i & 255}"
        f.IP.destination = (
            f"10.{128 + ((2 * i + 1) >> 16 & 127)}.{(2 * i + 1) >> 8 & 255}.{(2 * i + 1) & 255}"
        )
        f.IP.ipVersion = flow_pb2.IPv4
        f.l4.TCP.source_port = 30000 + i % 30000
        f.l4.TCP.destination_port = PORTS[destination % 4]
        f.l4.TCP.flags.SYN = True
        f.node_name = f"node-{i % 6}"
        f.is_reply.value = False
        response.node_name = f.node_name
        return response

    def first_since(self, since_ns: int) -> int:
        """The first flow at or after ``since_ns``."""
        ahead = since_ns - self.start_ns
        return max(0, -(-ahead * self.rate // 1_000_000_000))


class Relay(observer_pb2_grpc.ObserverServicer):
    def __init__(self, stream: Stream, stop: threading.Event) -> None:
        self.stream = stream
        self.stop = stop

    def GetFlows(self, request: Any, context: Any) -> Iterator[Any]:
        stream = self.stream
        i = stream.first_since(request.since.ToNanoseconds()) if request.HasField("since") else 0
        while context.is_active() and not self.stop.is_set():
            due = stream.start_ns + i * 1_000_000_000 // stream.rate
            wait = (due - time.time_ns()) / 1e9
            if wait > 0:
                self.stop.wait(wait)
                continue
            yield stream.flow(i)
            i += 1
            stream.sent = max(stream.sent, i)


def serve(stream: Stream, port: int) -> tuple[Any, threading.Event, int]:
    stop = threading.Event()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    observer_pb2_grpc.add_ObserverServicer_to_server(Relay(stream, stop), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, stop, bound


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return int(answer.status)
    except OSError as failed:
        return int(getattr(failed, "code", 0) or 0)


def _rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children (cpg receives in a second process)."""
    total = 0
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    for each in pids:
        try:
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def main() -> None:
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 11.0
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    cpg = shutil.which("cpg") or str(Path(sys.executable).with_name("cpg"))
    seconds = int(minutes * 60)
    with tempfile.TemporaryDirectory(prefix="cpg-soak-") as tmp:
        root = Path(tmp)
        stream = Stream(rate)
        server, stop, port = serve(stream, 0)
        metrics = 19000 + os.getpid() % 1000
        log = (root / "generate.log").open("w")
        proc = subprocess.Popen(
            [
                cpg,
                "generate",
                "--server",
                f"127.0.0.1:{port}",
                "-d",
                str(root / "live"),
                "--evidence-dir",
                str(root / "live-evidence"),
                "--flush-interval",
                f"{FLUSH_SECONDS}s",
                "--metrics-addr",
                f"127.0.0.1:{metrics}",
                "--duration",
                f"{seconds}s",
                "--quiet",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        began = time.monotonic()
        memory: list[tuple[float, float]] = []
        ready: list[tuple[float, int]] = []
        restarted_at = back_at = None
        next_memory = 0.0
        while proc.poll() is None:
            now = time.monotonic() - began
            if restarted_at is None and now >= seconds / 2:
                stop.set()
                server.stop(grace=None)
                restarted_at = now
                print(f"{now:6.1f} s: relay stopped")
            if restarted_at is not None and back_at is None and now >= restarted_at + 10:
                server, stop, _ = serve(stream, port)
                back_at = now
                print(f"{now:6.1f} s: relay back on port {port}")
            ready.append((now, _get(f"http://127.0.0.1:{metrics}/readyz")))
            if now >= next_memory:
                memory.append((now, _rss_mb(proc.pid)))
                next_memory += 10
            time.sleep(0.25)
        stop.set()
        server.stop(grace=None)
        log.close()
        if proc.returncode != 0:
            sys.exit(
                f"cpg generate failed ({proc.returncode}):\n{(root / 'generate.log').read_text()}"
            )
        logged = (root / "generate.log").read_text().splitlines()
        grpc_lines = [line for line in logged if re.match(r"[EIWF]\d{4} ", line)]
        print(
            f"generate's output: {len(logged)} lines, {len(grpc_lines)} of them gRPC's own"
            + (f" (first: {grpc_lines[0]!r})" if grpc_lines else "")
        )
        sent = stream.sent
        with (root / "sent.jsonl").open("w") as out:
            for i in range(sent):
                out.write(
                    json_format.MessageToJson(
                        stream.flow(i), preserving_proto_field_name=True, indent=None
                    )
                    + "\n"
                )
        subprocess.run(
            [cpg, "replay", str(root / "sent.jsonl"), "-d", str(root / "replay"), "--no-evidence"],
            check=True,
            capture_output=True,
        )
        print(
            f"{sent:,} flows sent in {seconds} s ({sent / seconds:,.0f}/s), a new pod at both ends of each"
        )
        down = [(t, s) for t, s in ready if restarted_at is not None and t >= restarted_at]
        went_unready = next((t for t, s in down if s != 200), None)
        again = next(
            (t for t, s in down if back_at is not None and t >= back_at and s == 200), None
        )
        if back_at is not None and again is not None:
            print(
                f"relay down at {restarted_at:.0f} s; /readyz not ready from {went_unready:.1f} s; "
                f"relay back at {back_at:.1f} s; ready again {again - back_at:.2f} s later "
                f"(flush interval {FLUSH_SECONDS} s)"
            )
        else:
            print("never ready again after the restart")
        print("resident memory of cpg's processes (MB), every minute:")
        print("  " + ", ".join(f"{t / 60:.0f}m {mb:.0f}" for t, mb in memory if int(t) % 60 < 10))
        settled = [mb for t, mb in memory if t >= 120]
        if settled:
            third = max(1, len(settled) // 3)
            early, late = max(settled[:third]), max(settled[-third:])
            print(
                f"  after 2 minutes: {min(settled):.0f}-{max(settled):.0f} MB; last third's peak {late:.0f} MB vs first third's {early:.0f} MB ({late / early:.2f}x)"
            )
        live = sorted(p.relative_to(root / "live") for p in (root / "live").rglob("*.yaml"))
        same = live == sorted(
            p.relative_to(root / "replay") for p in (root / "replay").rglob("*.yaml")
        ) and all(
            (root / "live" / p).read_bytes() == (root / "replay" / p).read_bytes() for p in live
        )
        print(
            f"{len(live)} policy files; live folder {'byte-identical to' if same else 'DIFFERS from'} the replay of the flows sent"
        )


if __name__ == "__main__":
    main()
