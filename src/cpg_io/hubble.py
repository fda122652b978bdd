"""The Hubble Relay gRPC client: connect (plain or TLS), build the server-side filters, stream
``observer.Observer/GetFlows``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import grpc

from cpg_io._proto.flow import flow_pb2
from cpg_io._proto.observer import observer_pb2, observer_pb2_grpc


class RelayError(Exception):
    """The relay could not be reached or refused the stream; the message says what to check."""


@attrs.frozen
class TLSSettings:
    enabled: bool = False
    ca_cert: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    server_name: str | None = None


def _read(path: Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RelayError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None


def open_channel(server: str, tls: TLSSettings) -> grpc.Channel:
    if not tls.enabled:
        return grpc.insecure_channel(server)
    if (tls.client_cert is None) != (tls.client_key is None):
        raise RelayError("--tls-client-cert and --tls-client-key go together")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_cert, "CA certificate"),
        private_key=_read(tls.client_key, "client key"),
        certificate_chain=_read(tls.client_cert, "client certificate"),
    )
    options = [("grpc.ssl_target_name_override", tls.server_name)] if tls.server_name else []
    return grpc.secure_channel(server, credentials, options=options)


def flow_filters(namespaces: list[str], include_audit: bool) -> list[Any]:
    """DROPPED (and AUDIT) flows, from or to pods of the namespaces when some are given."""
    verdicts = [flow_pb2.DROPPED] + ([flow_pb2.AUDIT] if include_audit else [])
    if not namespaces:
        return [flow_pb2.FlowFilter(verdict=verdicts)]
    prefixes = [f"{ns}/" for ns in namespaces]
    return [
        flow_pb2.FlowFilter(verdict=verdicts, source_pod=prefixes),
        flow_pb2.FlowFilter(verdict=verdicts, destination_pod=prefixes),
    ]


def flows_request(filters: list[Any], since: Any | None) -> Any:
    """Follow new flows; with ``since`` (a Timestamp), resume from that time."""
    request = observer_pb2.GetFlowsRequest(follow=True, whitelist=filters)
    if since is not None:
        request.since.CopyFrom(since)
    return request


def wait_ready(channel: grpc.Channel, server: str, timeout: float) -> None:
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise RelayError(
            f"cannot connect to Hubble Relay at {server} within {timeout:g}s; check --server "
            "(host:port), --tls flags, and that hubble-relay is running"
        ) from None


def stream_flows(channel: grpc.Channel, request: Any) -> Any:
    """The GetFlows call: iterate it for responses, ``cancel()`` it to stop."""
    return observer_pb2_grpc.ObserverStub(channel).GetFlows(request)
