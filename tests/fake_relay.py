"""A fake Hubble Relay: a real gRPC server on 127.0.0.1 built from cpg's own stubs. It streams
fixture flows, can break the stream once mid-way, honours ``since`` and can send lost events."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
from google.protobuf import json_format

from cpg_io._proto.observer import observer_pb2, observer_pb2_grpc


def responses_from_lines(lines: list[str]) -> list[Any]:
    out = []
    for line in lines:
        if line.strip():
            try:
                out.append(
                    json_format.Parse(
                        line, observer_pb2.GetFlowsResponse(), ignore_unknown_fields=True
                    )
                )
            except json_format.ParseError:
                continue  # the malformed lines of a capture
    return out


class FakeRelay(observer_pb2_grpc.ObserverServicer):
    def __init__(self, responses: list[Any], break_after: int | None = None) -> None:
        self.responses = responses
        self.break_after = break_after
        self.refuse_mask = False
        self.pause_after: int | None = None
        """Send this many responses, then wait for ``resume`` before the rest."""
        self.resume = threading.Event()
        """Answer a request with a field mask as a relay that cannot apply it does."""
        self.requests: list[Any] = []
        self.clients: list[str] = []
        """The common name of each request's client certificate (mutual TLS), in order."""
        self.done = threading.Event()
        self.closed = threading.Event()
        self.break_now = threading.Event()
        """Set: the open stream ends as a restarting relay ends it (once per set)."""

    def GetFlows(self, request: Any, context: Any) -> Iterator[Any]:
        names = context.auth_context().get("x509_common_name") or [b""]
        self.clients.append(names[0].decode())
        self.requests.append(request)
        if self.refuse_mask and request.HasField("field_mask"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid fieldmask path")
        since = request.since.ToNanoseconds() if request.HasField("since") else None
        sent = 0
        for response in self.responses:
            if since is not None and response.flow.time.ToNanoseconds() < since:
                continue
            if self.pause_after is not None and sent == self.pause_after:
                self.resume.wait(30)
            if self.break_after is not None and sent >= self.break_after:
                self.break_after = None  # break once
                context.abort(grpc.StatusCode.UNAVAILABLE, "relay restarting")
            if request.HasField("field_mask") and response.HasField("flow"):
                masked = observer_pb2.GetFlowsResponse()
                masked.CopyFrom(response)
                masked.ClearField("flow")
                request.field_mask.MergeMessage(response.flow, masked.flow)
                response = masked
            yield response
            sent += 1
        self.done.set()
        while context.is_active() and not self.closed.is_set():  # follow: keep the stream open
            if self.break_now.is_set():
                self.break_now.clear()
                context.abort(grpc.StatusCode.UNAVAILABLE, "relay restarting")
            self.closed.wait(0.05)


@contextmanager
def fake_relay(
    responses: list[Any], break_after: int | None = None, port: int = 0
) -> Iterator[tuple[FakeRelay, str]]:
    servicer = FakeRelay(responses, break_after)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    observer_pb2_grpc.add_ObserverServicer_to_server(servicer, server)
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        servicer.closed.set()
        server.stop(grace=None)


@contextmanager
def fake_tls_relay(
    responses: list[Any],
    cert: bytes,
    key: bytes,
    client_ca: bytes | None = None,
    break_after: int | None = None,
) -> Iterator[tuple[FakeRelay, str]]:
    """Over TLS; with ``client_ca``, mutual TLS as Hubble Relay's ``mtls`` setting asks: a
    client without a certificate that CA signed is refused."""
    servicer = FakeRelay(responses, break_after)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    observer_pb2_grpc.add_ObserverServicer_to_server(servicer, server)
    credentials = grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        servicer.closed.set()
        server.stop(grace=None)


def example_responses() -> list[object]:
    """The example capture as the relay's responses."""
    from conftest import EXAMPLE

    return responses_from_lines(EXAMPLE.read_text().splitlines())


def flood_responses(kind: str) -> Iterator[Any]:
    """An endless relay of denied egress flows, each with something new: ``workloads`` (a new
    source workload in every flow, 50 namespaces), ``peers`` (one workload, a new address in
    the world every flow) or ``verdicts`` (new workloads, forwarded and dropped in turn)."""
    from itertools import count

    from cpg_io._proto.flow import flow_pb2

    for i in count():
        response = observer_pb2.GetFlowsResponse()
        f = response.flow
        f.time.FromNanoseconds(1_700_000_000_000_000_000 + i * 1000)
        f.verdict = flow_pb2.DROPPED
        f.drop_reason_desc = flow_pb2.POLICY_DENIED
        if kind == "verdicts" and i % 2:
            f.verdict = flow_pb2.FORWARDED
            f.drop_reason_desc = flow_pb2.DROP_REASON_UNKNOWN
        f.traffic_direction = flow_pb2.EGRESS
        w = 0 if kind == "peers" else i
        namespace = f"ns-{w % 50}"
        f.IP.source = f"10.{(w >> 16) & 255}.{(w >> 8) & 255}.{w & 255}"
        f.l4.TCP.destination_port = 8080
        f.l4.TCP.source_port = 40000
        f.source.namespace = namespace
        f.source.identity = 100000 + w
        f.source.labels.extend([f"k8s:app=w{w}", f"k8s:io.kubernetes.pod.namespace={namespace}"])
        f.source.pod_name = f"w{w}-abc"
        if kind == "peers":
            f.IP.destination = f"52.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            f.destination.identity = 2
            f.destination.labels.append("reserved:world")
        else:
            f.IP.destination = "10.200.0.1"
            f.destination.namespace = "shop"
            f.destination.identity = 99
            f.destination.labels.extend(["k8s:app=api", "k8s:io.kubernetes.pod.namespace=shop"])
            f.destination.pod_name = "api-0"
        yield response
