"""Live-path throughput: ``python benchmarks/live.py [N [FLUSH_SECONDS]]`` (200,000; 5).

A fake Hubble Relay (a real gRPC server on 127.0.0.1 built from cpg's stubs) streams N
realistic DROPPED flows; cpg's live capture converts, aggregates and writes policies and
evidence. Prints flows/s from the first flow to the final write, and peak RSS.
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
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from cpg_core.aggregate import AggregateOptions
from cpg_io._proto.flow import flow_pb2
from cpg_io._proto.observer import observer_pb2, observer_pb2_grpc
from cpg_io.live import LiveCapture, LiveSettings
from cpg_io.pipeline import EvidenceSettings


def make_responses(count: int, seed: int = 7) -> list[Any]:
    rng = random.Random(seed)
    endpoints = []
    for ns in range(40):
        for app in range(25):
            ep = flow_pb2.Endpoint(
                namespace=f"team-{ns:02d}",
                identity=1000 + ns * 100 + app,
                labels=[f"k8s:app=svc-{app:02d}", f"k8s:io.kubernetes.pod.namespace=team-{ns:02d}"],
                pod_name=f"svc-{app:02d}-{rng.randrange(16**5):05x}",
            )
            endpoints.append(ep)
    calls = {i: [rng.randrange(len(endpoints)) for _ in range(6)] for i in range(len(endpoints))}
    out = []
    for i in range(count):
        src = rng.randrange(len(endpoints))
        dst = rng.choice(calls[src])
        response = observer_pb2.GetFlowsResponse(node_name=f"node-{i % 12}")
        f = response.flow
        f.time.FromNanoseconds(1_790_000_000_000_000_000 + i * 1_000_000)
        f.uuid = f"{rng.getrandbits(128):032x}"
        f.verdict = flow_pb2.DROPPED
        f.drop_reason_desc = flow_pb2.POLICY_DENIED
        f.IP.source = f"10.{src % 250}.0.1"
        f.IP.destination = f"10.{dst % 250}.0.2"
        f.l4.TCP.destination_port = (80, 443, 5432, 8080, 9090)[dst % 5]
        f.source.CopyFrom(endpoints[src])
        f.destination.CopyFrom(endpoints[dst])
        f.traffic_direction = flow_pb2.INGRESS if i % 2 else flow_pb2.EGRESS
        f.node_name = response.node_name
        f.is_reply.value = False
        out.append(response)
    return out


class Relay(observer_pb2_grpc.ObserverServicer):
    def __init__(self, responses: list[Any]) -> None:
        self.responses = responses
        self.stop = threading.Event()

    def GetFlows(self, request: Any, context: Any) -> Any:
        yield from self.responses
        while context.is_active() and not self.stop.is_set():
            self.stop.wait(0.05)


async def measure(address: str, count: int, out: Path) -> tuple[float, int]:
    settings = LiveSettings(
        server=address,
        output_dir=out / "policies",
        options=AggregateOptions(),
        flush_interval=float(sys.argv[2]) if len(sys.argv) > 2 else 5.0,
        evidence=EvidenceSettings(root=out / "evidence"),
    )
    capture = LiveCapture(settings)
    first = 0.0

    async def watch() -> None:
        nonlocal first
        while capture.progress.flows == 0:
            await asyncio.sleep(0.01)
        first = time.perf_counter()
        while capture.progress.flows < count:
            await asyncio.sleep(0.01)
        capture.stop.set()

    watcher = asyncio.create_task(watch())
    await capture.run()
    await watcher
    return time.perf_counter() - first, len(capture.result.files)


def serve(count: int, ports: Any) -> None:
    """The relay, in its own process so that it does not share cpg's interpreter. Messages
    are encoded beforehand, as a Go relay would send them at wire speed."""
    relay = Relay([r.SerializeToString() for r in make_responses(count)])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler(
        "observer.Observer",
        {
            "GetFlows": grpc.unary_stream_rpc_method_handler(
                relay.GetFlows,
                request_deserializer=observer_pb2.GetFlowsRequest.FromString,
                response_serializer=None,
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    ports.put(server.add_insecure_port("127.0.0.1:0"))
    server.start()
    server.wait_for_termination()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    relay = context.Process(target=serve, args=(count, ports), daemon=True)
    relay.start()
    try:
        port = ports.get(timeout=120)
        with tempfile.TemporaryDirectory(prefix="cpg-live-bench-") as tmp:
            seconds, files = asyncio.run(measure(f"127.0.0.1:{port}", count, Path(tmp)))
    finally:
        relay.terminate()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"live: {count:,} flows through gRPC into {files} policies")
    print(f"cpg generate path : {count / seconds:>10,.0f} flows/s ({seconds:.2f} s)")
    print(f"peak RSS (cpg)    : {rss:>10,.1f} MB")


if __name__ == "__main__":
    main()
