"""The Hubble Relay gRPC client: connect (plain or TLS), build the server-side filters, stream
``observer.Observer/GetFlows``."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

import attrs
import grpc
import grpc.experimental  # type: ignore[import-untyped]

from cpg_core import Setting
from cpg_io._proto.flow import flow_pb2
from cpg_io._proto.observer import observer_pb2
from cpg_io.errors import RelayError
from cpg_io.hubble_convert import FLOW_FIELDS
from cpg_io.store import RefusedFile, read_bounded


@attrs.frozen
class TLSSettings:
    enabled: bool = False
    ca_cert: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    server_name: str | None = None

    @classmethod
    def from_flags(
        cls,
        tls: bool,
        ca_cert: Path | None,
        client_cert: Path | None,
        client_key: Path | None,
        server_name: str | None,
    ) -> TLSSettings:
        """The TLS of the ``--tls*`` flags: a CA or a client certificate turns TLS on."""
        return cls(
            tls or bool(ca_cert or client_cert), ca_cert, client_cert, client_key, server_name
        )


MAX_TLS_BYTES = 1024 * 1024
"""A PEM file larger than this is no certificate or key (a link to /dev/zero, a log)."""


def _read(path: Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return read_bounded(path, MAX_TLS_BYTES)
    except RefusedFile as exc:
        raise RelayError(f"cannot read the {what}: {exc}") from None
    except OSError as exc:
        raise RelayError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None


# grpcio hands each streamed message over through a helper thread unless told otherwise; on
# one stream read by one thread that costs 4-7x as much per message as reading it directly.
_STREAM_OPTIONS = [(grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]


def open_channel(server: str, tls: TLSSettings) -> grpc.Channel:
    if not tls.enabled:
        return grpc.insecure_channel(server, options=_STREAM_OPTIONS)
    if (tls.client_cert is None) != (tls.client_key is None):
        raise RelayError(
            Setting("tls_client_cert"), " and ", Setting("tls_client_key"), " go together"
        )
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_cert, "CA certificate"),
        private_key=_read(tls.client_key, "client key"),
        certificate_chain=_read(tls.client_cert, "client certificate"),
    )
    options = [("grpc.ssl_target_name_override", tls.server_name)] if tls.server_name else []
    return grpc.secure_channel(server, credentials, options=options + _STREAM_OPTIONS)


def flow_filters(namespaces: list[str], include_audit: bool, learn: bool = False) -> list[Any]:
    """DROPPED (and AUDIT) flows, and with ``learn`` FORWARDED, REDIRECTED and AUDIT ones
    (all traffic that works today), from or to pods of the namespaces when some are given."""
    verdicts = [flow_pb2.DROPPED] + ([flow_pb2.AUDIT] if include_audit or learn else [])
    if learn:
        verdicts += [flow_pb2.FORWARDED, flow_pb2.REDIRECTED]
    if not namespaces:
        return [flow_pb2.FlowFilter(verdict=verdicts)]
    prefixes = [f"{ns}/" for ns in namespaces]
    return [
        flow_pb2.FlowFilter(verdict=verdicts, source_pod=prefixes),
        flow_pb2.FlowFilter(verdict=verdicts, destination_pod=prefixes),
    ]


def timestamp(key: str) -> Any:
    """A protobuf Timestamp from an RFC 3339 time key."""
    from google.protobuf import timestamp_pb2

    stamp = timestamp_pb2.Timestamp()
    stamp.FromJsonString(key)
    return stamp


def flows_request(filters: list[Any], since: Any | None, *, field_mask: bool = True) -> Any:
    """Follow new flows; with ``since`` (a Timestamp), resume from that time. With
    ``field_mask``, ask for only the fields cpg reads (a relay that does not know field masks
    ignores the field and sends everything)."""
    request = observer_pb2.GetFlowsRequest(follow=True, whitelist=filters)
    if field_mask:
        request.field_mask.paths.extend(FLOW_FIELDS)
    if since is not None:
        request.since.CopyFrom(since)
    return request


def _split(server: str) -> tuple[str, int]:
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RelayError(
            f"{server!r} is not host:port; give ", Setting("server"), " as e.g. localhost:4245"
        )
    return host.strip("[]"), int(port)


def diagnose(server: str, tls: TLSSettings, timeout: float) -> None:
    """What the operating system says about reaching ``server``, at once: a name that does
    not resolve, a refused connection, no answer, a failed TLS handshake. Each is its own
    RelayError; gRPC alone would wait out the whole timeout and say the same for all."""
    host, port = _split(server)
    if tls.enabled:  # unreadable certificate files first: they are the user's to fix
        _read(tls.ca_cert, "CA certificate")
        _read(tls.client_cert, "client certificate")
        _read(tls.client_key, "client key")
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise RelayError(
            f"cannot resolve {host!r} ({exc.strerror}); check the host name in ", Setting("server")
        ) from None
    family, kind, proto, _, address = addresses[0]
    try:
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(timeout)
            sock.connect(address)
            if tls.enabled:
                _handshake(sock, host, tls)
    except ConnectionRefusedError:
        raise RelayError(
            f"connection refused by {server}: nothing listens there; start a port-forward to "
            "hubble-relay (or leave ",
            Setting("server"),
            " out and cpg makes one) and check the port",
        ) from None
    except TimeoutError:
        raise RelayError(
            f"no answer from {server} within {timeout:g}s; check the address, and any firewall "
            "between here and the relay"
        ) from None
    except ssl.SSLError as exc:
        raise RelayError(
            f"TLS handshake with {server} failed ({exc.reason or exc}); check ",
            Setting("tls_ca_cert"),
            ", ",
            Setting("tls_server_name"),
            " and the client certificate",
        ) from None
    except OSError as exc:
        raise RelayError(f"cannot connect to {server}: {exc.strerror or exc}") from None


_REFUSED_CLIENT = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "it asks for one",
    "TLSV1_ALERT_UNKNOWN_CA": "signed by a CA it does not trust",
    "SSLV3_ALERT_BAD_CERTIFICATE": "a bad certificate",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": "expired",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "not accepted",
}
"""The alerts a relay that wants mutual TLS sends about the client's certificate."""


def _handshake(sock: socket.socket, host: str, tls: TLSSettings) -> None:
    context = ssl.create_default_context(
        cadata=(_read(tls.ca_cert, "CA certificate") or b"").decode() or None
    )
    if tls.client_cert is not None and tls.client_key is not None:
        context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    context.set_alpn_protocols(["h2"])
    server = "{}:{}".format(*sock.getpeername()[:2])
    with context.wrap_socket(sock, server_hostname=tls.server_name or host) as wrapped:
        wrapped.do_handshake()
        # With TLS 1.3 a server judges the client's certificate after the handshake: its
        # verdict (an alert, or the connection closed at once) comes with the first read. A
        # gRPC server sends its HTTP/2 settings at once, so this waits only on a server that
        # says nothing first, and at most the connection's own timeout (the socket's).
        try:
            if wrapped.recv(1):
                return
            why = "it closed the connection at once"
        except TimeoutError:
            return
        except ssl.SSLError as exc:
            if exc.reason not in _REFUSED_CLIENT:
                raise
            why = _REFUSED_CLIENT[exc.reason]
        except ConnectionResetError:
            why = "it reset the connection at once"
    given = tls.client_cert is not None
    raise RelayError(
        f"Hubble Relay at {server} refused "
        + ("the client certificate" if given else "the connection without a client certificate")
        + f" ({why}); for mutual TLS give ",
        Setting("tls_client_cert"),
        " and ",
        Setting("tls_client_key"),
        ": a certificate, valid now, signed by the CA the relay trusts for its clients",
    )


def wait_ready(channel: grpc.Channel, server: str, timeout: float) -> None:
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise RelayError(
            f"cannot connect to Hubble Relay at {server} within {timeout:g}s; check ",
            Setting("server"),
            " (host:port), ",
            Setting("tls"),
            ", and that hubble-relay is running",
        ) from None


def stream_raw_flows(channel: grpc.Channel, request: Any) -> Any:
    """The GetFlows call with its responses left encoded (bytes), for a reader that hands
    them to another process to decode: iterate it, ``cancel()`` it to stop."""
    call = channel.unary_stream(
        "/observer.Observer/GetFlows",
        request_serializer=observer_pb2.GetFlowsRequest.SerializeToString,
        response_deserializer=None,
    )
    return call(request)
