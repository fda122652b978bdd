"""``cpg shadow`` at the size of Calico's published staged-policy target: a reference set of
about 600 policies and 38,700 rules over 7,500 CIDR sets, judged against a relay that streams
as fast as gRPC lets it.

    python benchmarks/shadow.py [--flows 200000] [--keep DIR]

Prints: the relay's own rate (a raw client that only counts: the harness's ceiling), the
sustained flows/s ``cpg shadow`` takes in (from its ``/metrics``, first flow to last), the
evaluation latency per flow (p50/p99, exact, of ``PlanJudge.add`` in this process; and the
histogram ``cpg shadow`` exports), the time of a flush (judging the plan so far), and the peak
RSS of the ``cpg shadow`` process. The goal is 10,000 new flows/s sustained in one process.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

NAMESPACES = 60
APPS = 10
"""600 workloads, one proposed policy each."""
ENDPOINT_RULES = 52
CIDR_RULES = (12, 13)
"""Per policy: 52 endpoint rules and 12 or 13 CIDR-set rules: ~38,700 rules, 7,500 CIDR sets."""
CPG = str(Path(sys.executable).with_name("cpg"))


def _workloads() -> list[tuple[str, str]]:
    return [(f"ns-{n:02}", f"app-{a}") for n in range(NAMESPACES) for a in range(APPS)]


def _peer(index: int, offset: int) -> tuple[str, str]:
    workloads = _workloads()
    return workloads[(index * 7 + offset * 13 + 1) % len(workloads)]


def _cidr(index: int, k: int) -> str:
    return f"10.{100 + index // 250}.{index % 250}.{k * 16}/28"


def reference_policies(folder: Path) -> tuple[int, int]:
    """Write the reference set; (rules, CIDR sets)."""
    rules = cidr_sets = 0
    for index, (namespace, app) in enumerate(_workloads()):
        ingress, egress = [], []
        for offset in range(ENDPOINT_RULES):
            peer_ns, peer_app = _peer(index, offset)
            selector = {"matchLabels": {"app": peer_app, "io.kubernetes.pod.namespace": peer_ns}}
            port = [{"ports": [{"port": str(8000 + offset % 8), "protocol": "TCP"}]}]
            if offset % 2:
                ingress.append({"fromEndpoints": [selector], "toPorts": port})
            else:
                egress.append({"toEndpoints": [selector], "toPorts": port})
        for k in range(CIDR_RULES[index % 2]):
            egress.append(
                {
                    "toCIDRSet": [{"cidr": _cidr(index, k)}],
                    "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}],
                }
            )
            cidr_sets += 1
        rules += len(ingress) + len(egress)
        policy = {
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNetworkPolicy",
            "metadata": {"name": f"ref-{app}", "namespace": namespace},
            "spec": {
                "endpointSelector": {"matchLabels": {"app": app}},
                "ingress": ingress,
                "egress": egress,
            },
        }
        path = folder / namespace / f"{app}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(policy))  # JSON is YAML
    return rules, cidr_sets


def _endpoint(namespace: str, app: str, pod: int = 0) -> dict[str, Any]:
    identity = 1000 + int(namespace[3:]) * APPS + int(app[4:])
    return {
        "identity": identity,
        "namespace": namespace,
        "labels": [f"k8s:app={app}", f"k8s:io.kubernetes.pod.namespace={namespace}"],
        "pod_name": f"{app}-{pod}",
    }


def flow_records(count: int) -> Iterator[dict[str, Any]]:
    """Traffic over the reference set: mostly forwarded flows its rules admit, some they do
    not (would break), some denied; ~40 distinct connections per workload."""
    workloads = _workloads()
    for i in range(count):
        index = i % len(workloads)
        namespace, app = workloads[index]
        kind = (i // len(workloads)) % 40
        source = _endpoint(namespace, app, pod=i % 3)
        if kind < 30:  # egress to a peer its policy names
            offset = (kind * 2) % ENDPOINT_RULES
            dest = _endpoint(*_peer(index, offset))
            port, verdict, direction = 8000 + offset % 8, "FORWARDED", "EGRESS"
            dst_ip = f"10.1.{index % 250}.{offset}"
        elif kind < 36:  # to an address of its CIDR sets
            dest = {"identity": 2, "labels": ["reserved:world"]}
            port, verdict, direction = 443, "FORWARDED", "EGRESS"
            dst_ip = (
                _cidr(index, kind - 30).split("/")[0].rsplit(".", 1)[0] + f".{(kind - 30) * 16 + 3}"
            )
        elif kind < 38:  # works today, not in the proposal: would break
            dest = _endpoint(*_peer(index, 99))
            port, verdict, direction = 9999, "FORWARDED", "EGRESS"
            dst_ip = f"10.2.{index % 250}.{kind}"
        else:  # denied today
            dest = _endpoint(*_peer(index, 77))
            port, verdict, direction = 6000 + kind, "DROPPED", "EGRESS"
            dst_ip = f"10.3.{index % 250}.{kind}"
        seconds = 1_800_000_000 + i // 1000
        flow: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
            + f".{i % 1000:03}000000Z",
            "uuid": f"00000000-0000-4000-8000-{i:012x}",
            "verdict": verdict,
            "IP": {"source": f"10.0.{index % 250}.{i % 3 + 1}", "destination": dst_ip},
            "l4": {"TCP": {"source_port": 40000 + i % 20000, "destination_port": port}},
            "source": source,
            "destination": dest,
            "traffic_direction": direction,
            "is_reply": False,
            "node_name": "node-1",
        }
        if verdict == "DROPPED":
            flow["drop_reason_desc"] = "POLICY_DENIED"
        yield {"flow": flow}


# --- a relay as fast as gRPC lets it ----------------------------------------------------------


def _serve(messages_path: str, port_queue: Any) -> None:
    import grpc

    with open(messages_path, "rb") as handle:
        blobs = _split(handle.read())

    def get_flows(request: bytes, context: Any) -> Iterator[bytes]:
        yield from blobs
        while context.is_active():  # follow: keep the stream open
            time.sleep(0.05)

    handler = grpc.method_handlers_generic_handler(
        "observer.Observer",
        {
            "GetFlows": grpc.unary_stream_rpc_method_handler(
                get_flows,
                request_deserializer=lambda b: b,
                response_serializer=lambda b: b,
            ),
            "ServerStatus": grpc.unary_unary_rpc_method_handler(
                lambda request, context: _status(len(blobs)),
                request_deserializer=lambda b: b,
                response_serializer=lambda b: b,
            ),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    port_queue.put(port)
    server.wait_for_termination()


def _status(flows: int) -> bytes:
    from cpg_io._proto.observer import observer_pb2

    return observer_pb2.ServerStatusResponse(num_flows=flows, max_flows=flows).SerializeToString()


def _split(data: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        out.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return out


def write_messages(path: Path, count: int) -> None:
    from google.protobuf import json_format

    from cpg_io._proto.observer import observer_pb2

    with path.open("wb") as out:
        for record in flow_records(count):
            message = json_format.ParseDict(record, observer_pb2.GetFlowsResponse())
            blob = message.SerializeToString()
            out.write(len(blob).to_bytes(4, "big") + blob)


def relay_rate(address: str, count: int) -> float:
    """Messages/s a client that only counts gets from the relay."""
    import grpc

    channel = grpc.insecure_channel(address)
    call = channel.unary_stream(
        "/observer.Observer/GetFlows",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    began = time.perf_counter()
    stream = call(b"")
    for received, _ in enumerate(stream, 1):
        if received == count:
            break
    elapsed = time.perf_counter() - began
    stream.cancel()
    channel.close()
    return count / elapsed


# --- cpg shadow, scraped -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scrape(port: int) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = sample.name + (
                "" if not sample.labels else json.dumps(sample.labels, sort_keys=True)
            )
            out[key] = out.get(key, 0.0) + sample.value
    return out


def _flows(samples: dict[str, float]) -> float:
    return sum(v for k, v in samples.items() if k.startswith("cpg_flows_received_total"))


def _quantile(samples: dict[str, float], name: str, q: float) -> float:
    buckets = sorted(
        (float(json.loads(k[len(name) + len("_bucket") :])["le"]), v)
        for k, v in samples.items()
        if k.startswith(name + "_bucket")
    )
    total = buckets[-1][1] if buckets else 0
    if not total:
        return float("nan")
    rank, previous_bound, previous_count = q * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return previous_bound
            share = (rank - previous_count) / max(count - previous_count, 1e-12)
            return previous_bound + (bound - previous_bound) * share
        previous_bound, previous_count = bound, count
    return previous_bound


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_shadow(address: str, proposal: Path, count: int, flush: str) -> dict[str, float]:
    port = _free_port()
    command = [CPG, "shadow", "--server", address, "-d", str(proposal), "--duration", "30m"]
    proc = subprocess.Popen(
        [*command, "--metrics-addr", f"127.0.0.1:{port}", "--flush-interval", flush, "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        points: list[tuple[float, float]] = []
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            samples = _scrape(port)
            flows = _flows(samples)
            if flows:
                points.append((time.monotonic(), flows))
            if flows >= count:
                break
            if proc.poll() is not None:
                raise SystemExit(f"cpg shadow ended early: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.25)
        first = next(p for p in points if p[1] > 0)
        last = points[-1]
        rss = _peak_rss_mb(proc.pid)
        time.sleep(float(flush.rstrip("s")) * 2 + 1)  # a flush over everything received
        samples = _scrape(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(600)
    rate = (last[1] - first[1]) / max(last[0] - first[0], 1e-9)
    return {
        "flows_per_s": rate,
        "eval_p50": _quantile(samples, "cpg_evaluation_duration_seconds", 0.5),
        "eval_p99": _quantile(samples, "cpg_evaluation_duration_seconds", 0.99),
        "flush_p50": _quantile(samples, "cpg_flush_duration_seconds", 0.5),
        "flush_p99": _quantile(samples, "cpg_flush_duration_seconds", 0.99),
        "flushes": samples.get("cpg_flush_duration_seconds_count", 0.0),
        "peak_rss_mb": rss,
    }


def in_process(proposal: Path, count: int) -> dict[str, float]:
    """``PlanJudge.add`` per flow (exact percentiles) and one ``plan()`` over them all."""
    from cpg_core import parse_record
    from cpg_core.shadow import PlanJudge
    from cpg_io.policy_files import load_policies

    policies = load_policies(proposal)
    judge = PlanJudge(policies, None)
    flows = [parse_record(record) for record in flow_records(count)]
    times = []
    clock = time.perf_counter
    for flow in flows:
        began = clock()
        judge.add(flow)  # type: ignore[arg-type]
        times.append(clock() - began)
    began = clock()
    judge.plan()
    planned = clock() - began
    times.sort()
    return {
        "add_p50": times[len(times) // 2],
        "add_p99": times[int(len(times) * 0.99)],
        "add_mean": statistics.fmean(times),
        "plan_s": planned,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=200_000)
    parser.add_argument("--flush-interval", default="5s")
    parser.add_argument("--keep", type=Path, help="keep the reference set and messages here")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="cpg-shadow-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    proposal = root / "proposal"
    shutil.rmtree(proposal, ignore_errors=True)
    rules, cidr_sets = reference_policies(proposal)
    print(f"reference set: {NAMESPACES * APPS} policies, {rules} rules, {cidr_sets} CIDR sets")
    messages = root / "messages.bin"
    began = time.perf_counter()
    write_messages(messages, args.flows)
    print(f"{args.flows} flows built in {time.perf_counter() - began:.1f} s")
    ports: Any = multiprocessing.get_context("spawn").Queue()
    relay = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(str(messages), ports), daemon=True
    )
    relay.start()
    address = f"127.0.0.1:{ports.get(timeout=60)}"
    try:
        ceiling = relay_rate(address, args.flows)
        print(f"relay alone (a client that only counts): {ceiling:,.0f} flows/s")
        shadow = run_shadow(address, proposal, args.flows, args.flush_interval)
    finally:
        relay.terminate()
    print(
        f"cpg shadow: {shadow['flows_per_s']:,.0f} flows/s sustained "
        f"({shadow['flows_per_s'] / ceiling:.0%} of the relay's ceiling); "
        f"peak RSS {shadow['peak_rss_mb']:.0f} MB"
    )
    print(
        f"  evaluation per flow (exported histogram): p50 {shadow['eval_p50'] * 1e6:.1f} us, "
        f"p99 {shadow['eval_p99'] * 1e6:.1f} us; flush p50 {shadow['flush_p50']:.2f} s, "
        f"p99 {shadow['flush_p99']:.2f} s over {shadow['flushes']:.0f} flushes"
    )
    exact = in_process(proposal, min(args.flows, 100_000))
    print(
        f"in process, PlanJudge.add: p50 {exact['add_p50'] * 1e6:.1f} us, p99 "
        f"{exact['add_p99'] * 1e6:.1f} us, mean {exact['add_mean'] * 1e6:.1f} us "
        f"({1 / exact['add_mean']:,.0f} flows/s); plan() over them: {exact['plan_s']:.2f} s"
    )
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main(sys.argv[1:]))
