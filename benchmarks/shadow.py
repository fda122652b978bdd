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
import functools
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
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NAMESPACES = 60
APPS = 10
"""600 workloads, one proposed policy each."""
ENDPOINT_RULES = 52
CIDR_RULES = (12, 13)
"""Per policy: 52 endpoint rules and 12 or 13 CIDR-set rules: ~38,700 rules, 7,500 CIDR sets."""
CPG = str(Path(sys.executable).with_name("cpg"))


@functools.cache
def _workloads() -> list[tuple[str, str]]:
    return [(f"ns-{n:02}", f"app-{a}") for n in range(NAMESPACES) for a in range(APPS)]


CONNECTIONS = ENDPOINT_RULES // 2
"""Each workload calls 26 others; each call is an egress rule at the caller and an ingress
rule at the callee (52 endpoint rules per policy on average)."""


def _callee(index: int, k: int) -> int:
    count = NAMESPACES * APPS
    callee = (index * 7 + k * 13 + 1) % count
    return callee if callee != index else (callee + 1) % count


def _port(k: int) -> int:
    return 8000 + k % 8


def _cidr(index: int, k: int) -> str:
    return f"10.{100 + index // 250}.{index % 250}.{k * 16}/28"


def _selector(index: int) -> dict[str, Any]:
    namespace, app = _workloads()[index]
    return {"matchLabels": {"app": app, "io.kubernetes.pod.namespace": namespace}}


def reference_policies(folder: Path) -> tuple[int, int]:
    """Write the reference set; (rules, CIDR sets)."""
    workloads = _workloads()
    ingress: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(workloads))}
    egress: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(workloads))}
    for index in range(len(workloads)):
        for k in range(CONNECTIONS):
            callee = _callee(index, k)
            port = [{"ports": [{"port": str(_port(k)), "protocol": "TCP"}]}]
            egress[index].append({"toEndpoints": [_selector(callee)], "toPorts": port})
            ingress[callee].append({"fromEndpoints": [_selector(index)], "toPorts": port})
    cidr_sets = 0
    for index in range(len(workloads)):
        for k in range(CIDR_RULES[index % 2]):
            egress[index].append(
                {
                    "toCIDRSet": [{"cidr": _cidr(index, k)}],
                    "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}],
                }
            )
            cidr_sets += 1
    rules = 0
    for index, (namespace, app) in enumerate(workloads):
        rules += len(ingress[index]) + len(egress[index])
        policy = {
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNetworkPolicy",
            "metadata": {"name": f"ref-{app}", "namespace": namespace},
            "spec": {
                "endpointSelector": {"matchLabels": {"app": app}},
                "ingress": ingress[index],
                "egress": egress[index],
            },
        }
        path = folder / namespace / f"{app}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(policy))  # JSON is YAML
    return rules, cidr_sets


def _endpoint(index: int, pod: int = 0) -> dict[str, Any]:
    namespace, app = _workloads()[index]
    return {
        "identity": 1000 + index,
        "namespace": namespace,
        "labels": [f"k8s:app={app}", f"k8s:io.kubernetes.pod.namespace={namespace}"],
        "pod_name": f"{app}-{pod}",
    }


def flow_records(count: int) -> Iterator[dict[str, Any]]:
    """Traffic over the reference set: mostly forwarded flows its rules admit at both ends,
    some they do not (would break), some denied; 40 kinds of connection per workload."""
    workloads = len(_workloads())
    for i in range(count):
        index = i % workloads
        kind = (i // workloads) % 40
        source = _endpoint(index, pod=i % 3)
        if kind < CONNECTIONS:  # a call its policy and the callee's admit
            callee = _callee(index, kind)
            dest = _endpoint(callee)
            port, verdict = _port(kind), "FORWARDED"
            dst_ip = f"10.1.{callee % 250}.{callee // 250 + 1}"
        elif kind < 36:  # to an address of its CIDR sets
            k = (kind - CONNECTIONS) % CIDR_RULES[0]
            dest = {"identity": 2, "labels": ["reserved:world"]}
            port, verdict = 443, "FORWARDED"
            dst_ip = _cidr(index, k).split("/")[0].rsplit(".", 1)[0] + f".{k * 16 + 3}"
        elif kind < 38:  # works today, not in the proposal: would break
            dest = _endpoint((index + 301) % workloads)
            port, verdict = 9999, "FORWARDED"
            dst_ip = f"10.2.{index % 250}.{kind}"
        else:  # denied today
            dest = _endpoint((index + 401) % workloads)
            port, verdict = 6000 + kind, "DROPPED"
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
            "traffic_direction": "EGRESS",
            "is_reply": False,
            "node_name": "node-1",
        }
        if verdict == "DROPPED":
            flow["drop_reason_desc"] = "POLICY_DENIED"
        yield {"flow": flow}


# --- a relay at wire speed ---------------------------------------------------------------------
#
# A Python gRPC server sends one message per call of its generator (~10,000/s): the harness
# would measure itself. This relay speaks HTTP/2 directly (the h2 library): the whole stream
# is framed once, up front, and written as DATA frames as fast as flow control lets it.


def _serve(messages_path: str, port_queue: Any) -> None:
    import h2.config
    import h2.connection
    import h2.events

    with open(messages_path, "rb") as handle:
        body = b"".join(b"\x00" + blob[:4] + blob[4:] for blob in _framed(handle.read()))
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port_queue.put(listener.getsockname()[1])

    def serve(conn_socket: socket.socket) -> None:
        conn_socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        conn = h2.connection.H2Connection(config=config)
        conn.initiate_connection()
        conn_socket.sendall(conn.data_to_send())
        stream_id, sent = None, 0
        while True:
            if stream_id is not None and sent < len(body):
                window = min(conn.local_flow_control_window(stream_id), 1 << 20)
                while window > 0 and sent < len(body):
                    size = min(window, conn.max_outbound_frame_size, len(body) - sent)
                    conn.send_data(stream_id, body[sent : sent + size])
                    sent += size
                    window -= size
                conn_socket.sendall(conn.data_to_send())
                if sent < len(body) and conn.local_flow_control_window(stream_id) > 0:
                    continue
            data = conn_socket.recv(1 << 16)
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    headers = dict(event.headers)
                    if headers.get(":path") == "/observer.Observer/GetFlows":
                        stream_id = event.stream_id
                        conn.send_headers(
                            stream_id, [(":status", "200"), ("content-type", "application/grpc")]
                        )
                    else:
                        conn.send_headers(
                            event.stream_id,
                            [
                                (":status", "200"),
                                ("content-type", "application/grpc"),
                                ("grpc-status", "12"),
                            ],
                            end_stream=True,
                        )
                elif isinstance(event, h2.events.StreamReset | h2.events.ConnectionTerminated):
                    return
            conn_socket.sendall(conn.data_to_send())

    while True:
        accepted, _ = listener.accept()
        threading.Thread(target=serve, args=(accepted,), daemon=True).start()


def _framed(data: bytes) -> list[bytes]:
    """The file's messages, each with its 4-byte length in front (as gRPC frames it)."""
    out, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        out.append(data[at : at + 4 + size])
        at += 4 + size
    return out


def _message(record: dict[str, Any]) -> Any:
    """One record as the relay's protobuf, field by field (json_format takes ~1 ms a flow:
    minutes for the counts a sustained rate needs)."""
    from cpg_io._proto.flow import flow_pb2
    from cpg_io._proto.observer import observer_pb2

    f = record["flow"]
    message = observer_pb2.GetFlowsResponse()
    flow = message.flow
    flow.time.FromJsonString(f["time"])
    flow.uuid = f["uuid"]
    flow.verdict = flow_pb2.Verdict.Value(f["verdict"])
    flow.IP.source, flow.IP.destination = f["IP"]["source"], f["IP"]["destination"]
    flow.l4.TCP.source_port = f["l4"]["TCP"]["source_port"]
    flow.l4.TCP.destination_port = f["l4"]["TCP"]["destination_port"]
    for side in ("source", "destination"):
        endpoint, given = getattr(flow, side), f[side]
        endpoint.identity = given["identity"]
        endpoint.namespace = given.get("namespace", "")
        endpoint.labels.extend(given["labels"])
        endpoint.pod_name = given.get("pod_name", "")
    flow.traffic_direction = flow_pb2.TrafficDirection.Value(f["traffic_direction"])
    flow.is_reply.value = f["is_reply"]
    flow.node_name = f["node_name"]
    if "drop_reason_desc" in f:
        flow.drop_reason_desc = flow_pb2.DropReason.Value(f["drop_reason_desc"])
    return message


def write_messages(path: Path, count: int) -> None:
    from google.protobuf import json_format

    from cpg_io._proto.observer import observer_pb2

    with path.open("wb") as out:
        for i, record in enumerate(flow_records(count)):
            message = _message(record)
            if i < 50:  # the fast path builds what the JSON mapping builds
                assert message == json_format.ParseDict(record, observer_pb2.GetFlowsResponse())
            blob = message.SerializeToString()
            out.write(len(blob).to_bytes(4, "big") + blob)


def relay_rate(address: str, count: int) -> float:
    """Flows/s a client that only counts bytes gets from the relay (HTTP/2, no gRPC library):
    the harness's ceiling."""
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings

    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    conn = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding="utf-8"))
    conn.initiate_connection()
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: (1 << 31) - 1})
    conn.increment_flow_control_window((1 << 31) - 1 - 65535)
    stream = conn.get_next_available_stream_id()
    conn.send_headers(
        stream,
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", address),
            (":path", "/observer.Observer/GetFlows"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ],
    )
    conn.send_data(stream, b"\x00\x00\x00\x00\x00", end_stream=True)
    sock.sendall(conn.data_to_send())
    began = time.perf_counter()
    buffered, received = b"", 0
    while received < count:
        data = sock.recv(1 << 20)
        if not data:
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                buffered += event.data
                at = 0
                while len(buffered) - at >= 5:
                    size = int.from_bytes(buffered[at + 1 : at + 5], "big")
                    if len(buffered) - at < 5 + size:
                        break
                    at += 5 + size
                    received += 1
                buffered = buffered[at:]
        sock.sendall(conn.data_to_send())
    elapsed = time.perf_counter() - began
    sock.close()
    return received / elapsed


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


def run_shadow(
    address: str, proposal: Path, count: int, flush: str, source: Path | None = None
) -> dict[str, float]:
    """``cpg shadow`` of this checkout, or of the ``src`` folder ``source`` (another
    version of cpg, for a side-by-side run)."""
    port = _free_port()
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    command = [CPG, "shadow", "--server", address, "-d", str(proposal), "--duration", "30m"]
    proc = subprocess.Popen(
        [*command, "--metrics-addr", f"127.0.0.1:{port}", "--flush-interval", flush, "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
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
    parser.add_argument(
        "--baseline",
        type=Path,
        help="the src folder of another cpg (git worktree add /tmp/old REV): run it too",
    )
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="cpg-shadow-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    proposal = root / "proposal"
    shutil.rmtree(proposal, ignore_errors=True)
    rules, cidr_sets = reference_policies(proposal)
    print(f"reference set: {NAMESPACES * APPS} policies, {rules} rules, {cidr_sets} CIDR sets")
    messages = root / f"messages-{args.flows}.bin"
    if not messages.exists():  # kept (--keep) from an earlier run with as many flows
        began = time.perf_counter()
        write_messages(messages.with_suffix(".tmp"), args.flows)
        messages.with_suffix(".tmp").rename(messages)
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
        if args.baseline:
            old = run_shadow(address, proposal, args.flows, args.flush_interval, args.baseline)
            print(
                f"baseline {args.baseline}: {old['flows_per_s']:,.0f} flows/s sustained, flush "
                f"p50 {old['flush_p50']:.2f} s, p99 {old['flush_p99']:.2f} s; this checkout "
                f"{shadow['flows_per_s'] / old['flows_per_s']:.2f}x"
            )
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
