"""Live-path throughput at cluster speed: ``python benchmarks/live.py [N [FLUSH_SECONDS
[NAMESPACES [EVIDENCE_SECONDS]]]]`` (1,000,000; 5; 40 namespaces of 25 workloads: 1,000 policy
targets; evidence of unchanged policies every 60 s).

A relay built for benchmarks (h2, sans-IO HTTP/2, in its own process) pre-encodes N realistic
GetFlowsResponse messages (~750 bytes, 6 labels, 40 namespaces × 25 workloads: 1,000 policy
targets) into gRPC frames and writes them in full HTTP/2 DATA frames, so that it is not the
bottleneck. First the run measures the bare-receive floor: a gRPC client (the same channel
options cpg uses) that only counts messages. Then cpg's live capture (the code of the
interpreter running this script) takes the same stream with the default 5 s flush. Prints the
sustained flows/s (from 10 s after the first flow to the last flow received, so neither the
start nor the final flush counts), each flush's time, the longest gap between two received
messages, peak RSS (of cpg's process and, for builds that have one, of its receiving
process), lost events and the ratio to the floor.

Compare builds by running this same file with each build's interpreter.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental
import h2.config
import h2.connection
import h2.events

from cpg_core._synthesis.aggregate import AggregateOptions
from cpg_io._proto.flow import flow_pb2
from cpg_io._proto.observer import observer_pb2, observer_pb2_grpc

try:  # this tree's run layer; older builds exported these from cpg_io.runs
    from cpg_io.runs._live import LiveCapture, LiveSettings
    from cpg_io.runs._output import EvidenceSettings
except ImportError:  # pragma: no cover - an older build under comparison
    from cpg_io.runs import EvidenceSettings, LiveCapture, LiveSettings  # type: ignore[attr-defined,no-redef]


def make_messages(count: int, namespaces: int = 40, seed: int = 7) -> list[bytes]:
    """Encoded GetFlowsResponse messages: DROPPED POLICY_DENIED flows between 25 workloads
    per namespace (1,000 for 40 namespaces)."""
    rng = random.Random(seed)
    endpoints = []
    for ns in range(namespaces):
        for app in range(25):
            namespace = f"team-{ns:02d}"
            endpoints.append(
                flow_pb2.Endpoint(
                    namespace=namespace,
                    identity=1000 + ns * 100 + app,
                    labels=[
                        f"k8s:app=svc-{app:02d}",
                        f"k8s:app.kubernetes.io/part-of=team-{ns:02d}",
                        f"k8s:version=v{1 + app % 3}",
                        f"k8s:tier={('web', 'api', 'db')[app % 3]}",
                        f"k8s:io.kubernetes.pod.namespace={namespace}",
                        "k8s:io.cilium.k8s.policy.cluster=default",
                    ],
                    pod_name=f"svc-{app:02d}-{rng.randrange(16**10):010x}",
                    cluster_name="default",
                )
            )
    calls = {i: [rng.randrange(len(endpoints)) for _ in range(6)] for i in range(len(endpoints))}
    out = []
    for i in range(count):
        src = rng.randrange(len(endpoints))
        dst = rng.choice(calls[src])
        response = observer_pb2.GetFlowsResponse(node_name=f"kind-worker-{i % 12}")
        response.time.FromNanoseconds(1_790_000_000_000_000_000 + i * 1_000_000)
        f = response.flow
        f.time.FromNanoseconds(1_790_000_000_000_000_000 + i * 1_000_000)
        f.uuid = f"{rng.getrandbits(128):032x}"
        f.verdict = flow_pb2.DROPPED
        f.drop_reason = 133
        f.drop_reason_desc = flow_pb2.POLICY_DENIED
        f.IP.source = f"10.{src % 250}.{i % 250}.{i % 199}"
        f.IP.destination = f"10.{dst % 250}.3.4"
        f.l4.TCP.source_port = 30000 + i % 30000
        f.l4.TCP.destination_port = (80, 443, 5432, 8080, 9090)[dst % 5]
        f.source.CopyFrom(endpoints[src])
        f.destination.CopyFrom(endpoints[dst])
        f.traffic_direction = flow_pb2.INGRESS if i % 2 else flow_pb2.EGRESS
        f.node_name = response.node_name
        f.is_reply.value = False
        f.event_type.type = 1
        f.event_type.sub_type = 133
        out.append(response.SerializeToString())
    return out


# --- the relay -------------------------------------------------------------------------------


def _grpc_frames(messages: list[bytes]) -> bytes:
    return b"".join(b"\x00" + len(m).to_bytes(4, "big") + m for m in messages)


class _RelayProtocol(asyncio.Protocol):
    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding=None)
        )
        self.transport: Any = None
        self.sending: dict[int, int] = {}  # stream -> offset
        self.window_open = asyncio.Event()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.conn.local_settings.initial_window_size = 1 << 30
        self.conn.initiate_connection()
        self.transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                self.conn.send_headers(
                    event.stream_id,
                    [(b":status", b"200"), (b"content-type", b"application/grpc")],
                )
            elif isinstance(event, h2.events.DataReceived):
                self.conn.acknowledge_received_data(len(event.data), event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.sending[event.stream_id] = 0
                asyncio.get_running_loop().create_task(self._send(event.stream_id))
            elif isinstance(event, h2.events.WindowUpdated):
                self.window_open.set()
            elif isinstance(event, h2.events.StreamReset):
                self.sending.pop(event.stream_id, None)
        self.transport.write(self.conn.data_to_send())

    async def _send(self, stream_id: int) -> None:
        payload = self.payload
        while stream_id in self.sending and self.sending[stream_id] < len(payload):
            offset = self.sending[stream_id]
            window = min(
                self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size
            )
            if window <= 0:
                self.window_open.clear()
                await self.window_open.wait()
                continue
            chunk = payload[offset : offset + window]
            self.conn.send_data(stream_id, chunk)
            self.sending[stream_id] = offset + len(chunk)
            self.transport.write(self.conn.data_to_send())
            if self.transport.get_write_buffer_size() > 8 << 20:
                await asyncio.sleep(0)  # let the socket drain
                while self.transport.get_write_buffer_size() > 1 << 20:
                    await asyncio.sleep(0.001)
        # then keep the stream open, as a following relay does


def serve(count: int, ports: Any, namespaces: int = 40) -> None:
    payload = _grpc_frames(make_messages(count, namespaces))

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(
            lambda: _RelayProtocol(payload), "127.0.0.1", 0
        )
        ports.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


# --- the measurements ------------------------------------------------------------------------

_OPTIONS = [(grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]


def bare_receive(address: str, count: int) -> float:
    """Messages/s of a gRPC client that only receives: the floor no client can beat here."""
    import grpc.experimental

    channel = grpc.insecure_channel(address, options=_OPTIONS)
    stub = observer_pb2_grpc.ObserverStub(channel)
    call = stub.GetFlows(observer_pb2.GetFlowsRequest(follow=True))
    start = time.perf_counter()
    for n, _ in enumerate(call, 1):
        if n == count:
            break
    seconds = time.perf_counter() - start
    call.cancel()
    channel.close()
    return count / seconds


async def measure(
    address: str, count: int, out: Path, flush: float, evidence_interval: float = 60.0
) -> dict[str, Any]:
    settings = LiveSettings(
        server=address,
        output_dir=out / "policies",
        options=AggregateOptions(),
        flush_interval=flush,
        evidence_interval=evidence_interval,
        evidence=EvidenceSettings(root=out / "evidence"),
    )
    capture = LiveCapture(settings)
    flushes: list[float] = []
    spans: list[tuple[float, float]] = []
    real_flush = capture.flush

    def timed_flush(*args: Any, **kwargs: Any) -> None:
        began = time.perf_counter()
        real_flush(*args, **kwargs)
        flushes.append(time.perf_counter() - began)
        spans.append((began, time.perf_counter()))

    capture.flush = timed_flush  # type: ignore[method-assign]
    gap = {"last": 0.0, "max": 0.0, "at": 0.0}
    real_take = capture._take

    def timed_take(response: Any) -> None:
        now = time.perf_counter()
        if gap["last"] and now - gap["last"] > gap["max"]:
            gap["max"], gap["at"] = now - gap["last"], now
        gap["last"] = now
        real_take(response)

    capture._take = timed_take  # type: ignore[method-assign]
    marks: dict[str, float] = {}

    async def watch() -> None:
        while capture.progress.flows == 0:
            await asyncio.sleep(0.01)
        marks["first"] = time.perf_counter()
        while capture.progress.flows < count:
            if "warm" not in marks and time.perf_counter() - marks["first"] >= 10:
                marks["warm"], marks["warm_flows"] = time.perf_counter(), capture.progress.flows
            await asyncio.sleep(0.01)
        marks["last"] = time.perf_counter()
        capture.stop.set()

    watcher = asyncio.create_task(watch())
    await capture.run()
    await watcher
    start = marks.get("warm", marks["first"])
    start_flows = marks.get("warm_flows", 0)
    return {
        "sustained": (count - start_flows) / max(1e-9, marks["last"] - start),
        "overall": count / (marks["last"] - marks["first"]),
        "flushes": flushes,
        "max_gap": gap["max"],
        "gap_in_flush": any(a <= gap["at"] <= b + gap["max"] for a, b in spans),
        "files": len(capture.result.files),
        "lost": capture.stats.lost_events,
    }


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    flush = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    namespaces = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    evidence_interval = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    relay = context.Process(target=serve, args=(count, ports, namespaces), daemon=True)
    relay.start()
    try:
        port = ports.get(timeout=600)
        address = f"127.0.0.1:{port}"
        floor = bare_receive(address, count)
        print(
            f"relay + bare receive floor : {floor:>10,.0f} messages/s (the relay serves at least this)"
        )
        with tempfile.TemporaryDirectory(prefix="cpg-live-bench-") as tmp:
            result = asyncio.run(measure(address, count, Path(tmp), flush, evidence_interval))
        # before the relay is reaped: the only child waited for is cpg's receiving process
        receiver_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    finally:
        relay.terminate()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    flushes = result["flushes"]
    print(f"live: {count:,} flows into {result['files']} policies, {flush:g} s flush")
    print(
        f"cpg generate path (sustained) : {result['sustained']:>10,.0f} flows/s "
        f"(ratio to floor {result['sustained'] / floor:.2f}; overall {result['overall']:,.0f})"
    )
    print("flush seconds                 : " + ", ".join(f"{s:.3f}" for s in flushes))
    during = " (during a flush)" if result["gap_in_flush"] else ""
    print(f"longest receive gap           : {result['max_gap'] * 1000:>10,.0f} ms{during}")
    print(f"peak RSS (cpg process)        : {rss:>10,.1f} MB; lost events {result['lost']}")
    if receiver_rss:  # builds since the receiving process (ARCHITECTURE §D34)
        print(f"peak RSS (receiving process)  : {receiver_rss:>10,.1f} MB")


if __name__ == "__main__":
    threading.stack_size(0)
    main()
