"""``cpg generate``: watch Hubble Relay and write policies as denied flows arrive."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import attrs
import typer

from cpg_cli import options as opt
from cpg_cli.progress import GenerateProgress, on_terminal
from cpg_cli.report import print_run, warn_about_run
from cpg_cli.terminal import fail, say
from cpg_cli.words import flag
from cpg_core import CpgError, LiveRequest, TimeWindow, duration_seconds
from cpg_core.reading import time_key
from cpg_io.errors import RelaySetupError
from cpg_io.evidence_store import default_evidence_root
from cpg_io.hubble import TLSSettings
from cpg_io.kube import prepare_relay
from cpg_io.live import LiveCapture, LiveSettings
from cpg_io.pipeline import EvidenceSettings, ReplayResult

log = logging.getLogger("cpg")


def generate(
    server: Annotated[
        str | None,
        typer.Option(
            "-s",
            "--server",
            metavar="ADDR",
            envvar="HUBBLE_SERVER",
            help="Hubble Relay address host:port. Without it, cpg finds a running "
            "k8s-app=hubble-relay pod (--relay-namespace) and port-forwards to it through the "
            "Kubernetes API (--kubeconfig, --context).",
            show_default=False,
        ),
    ] = None,
    namespace: opt.Namespaces = [],  # noqa: B006 - Typer reads the default, never mutates it
    all_namespaces: opt.AllNamespaces = False,
    output_dir: opt.OutputDir = Path("policies"),
    tls: Annotated[
        bool, typer.Option("--tls", envvar="HUBBLE_TLS", help="Connect with TLS.")
    ] = False,
    tls_ca_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-ca-cert",
            "--tls-ca-cert-files",
            metavar="FILE",
            envvar="HUBBLE_TLS_CA_CERT_FILES",
            help="CA bundle to trust (PEM).",
            show_default=False,
        ),
    ] = None,
    tls_client_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-client-cert",
            "--tls-client-cert-file",
            metavar="FILE",
            envvar="HUBBLE_TLS_CLIENT_CERT_FILE",
            help="Client certificate (PEM) for mutual TLS.",
            show_default=False,
        ),
    ] = None,
    tls_client_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-client-key",
            "--tls-client-key-file",
            metavar="FILE",
            envvar="HUBBLE_TLS_CLIENT_KEY_FILE",
            help="Client key (PEM) for mutual TLS.",
            show_default=False,
        ),
    ] = None,
    tls_server_name: Annotated[
        str | None,
        typer.Option(
            "--tls-server-name",
            metavar="NAME",
            envvar="HUBBLE_TLS_SERVER_NAME",
            help="Name to expect in the relay's certificate.",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        str,
        typer.Option("--timeout", metavar="DURATION", help="How long to wait for the connection."),
    ] = "10s",
    flush_interval: Annotated[
        str,
        typer.Option(
            "--flush-interval",
            metavar="DURATION",
            help="How often policies and evidence are written.",
        ),
    ] = "5s",
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration",
            metavar="DURATION",
            help="Stop by itself after this long (e.g. 10m).",
            show_default=False,
        ),
    ] = None,
    kubeconfig: opt.Kubeconfig = None,
    context: opt.Context = None,
    cluster_dedup: Annotated[
        bool,
        typer.Option(
            "--cluster-dedup",
            help="Do not write policies the cluster already has an equivalent cpg-managed "
            "policy for (lists ciliumnetworkpolicies labelled app.kubernetes.io/managed-by=cpg).",
        ),
    ] = False,
    relay_namespace: Annotated[
        str, typer.Option("--relay-namespace", metavar="NS", help="Namespace of hubble-relay.")
    ] = "kube-system",
    include_audit: opt.IncludeAudit = False,
    ignore_protocol: opt.IgnoreProtocols = [],  # noqa: B006
    ignore_drop_reason: opt.IgnoreDropReasons = [],  # noqa: B006
    l7: opt.L7 = False,
    l7_collapse_paths: opt.L7CollapsePaths = False,
    dry_run: opt.DryRun = False,
    no_diff: opt.NoDiff = False,
    exit_code: opt.ExitCode = False,
    evidence_dir: opt.EvidenceDir = None,
    no_evidence: opt.NoEvidence = False,
    evidence_samples: opt.EvidenceSamples = 10,
    evidence_sessions: opt.EvidenceSessions = 10,
    evidence_redact: opt.EvidenceRedact = False,
    fail_on_infra_drops: opt.FailOnInfraDrops = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="TIME|DURATION",
            help="Also take the flows Hubble still buffers from TIME (RFC 3339) or the last "
            "DURATION (30m, 2h), counted back from now as hubble observe does.",
            show_default=False,
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            metavar="TIME",
            help="Stop at TIME (RFC 3339, in the future); flows after it are not used.",
            show_default=False,
        ),
    ] = None,
    evidence_interval: Annotated[
        str,
        typer.Option(
            "--evidence-interval",
            metavar="DURATION",
            help="How often the evidence of policies whose rules did not change is written "
            "(their files are not touched); the last flush, on Ctrl+C or SIGTERM, writes it "
            "all. A crash loses at most this much evidence, never a rule.",
        ),
    ] = "1m",
    min_flows: opt.MinFlows = 1,
    kustomize: opt.Kustomize = False,
    output: opt.Output = "text",
    quiet: opt.Quiet = False,
    log_level: opt.LogLevel = "warning",
) -> None:
    """Watch Hubble Relay and write policies for denied flows as they arrive.

    Streams DROPPED flows (and AUDIT with --include-audit) from observer.Observer/GetFlows,
    writes changed policies and evidence every --flush-interval, and stops on Ctrl+C or
    SIGTERM (final flush, then the report) or after --duration. A second Ctrl+C exits at once.
    A lost stream is resumed from the last flow's time, with growing pauses; flows with a uuid
    are never counted twice.
    """
    opt.setup_logging(log_level)
    opt.check_exit_code(exit_code, dry_run)
    live = opt.validated(
        lambda: LiveRequest.build(
            server=server,
            timeout=timeout,
            flush_interval=flush_interval,
            duration=duration,
            cluster_dedup=cluster_dedup,
        )
    )
    request = opt.capture_request(
        namespace=namespace,
        all_namespaces=all_namespaces,
        include_audit=include_audit,
        ignore_protocol=ignore_protocol,
        ignore_drop_reason=ignore_drop_reason,
        l7=l7,
        l7_collapse_paths=l7_collapse_paths,
        max_samples=evidence_samples if not (no_evidence or dry_run) else 0,
    )
    namespaces = list(request.namespaces)
    window = opt.validated(lambda: TimeWindow.build(since, until))
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    first, last = opt.validated(lambda: window.resolve(now))
    stop_after = live.duration
    if until is not None:
        if isinstance(window.until, float) or last <= time_key(now):
            raise typer.BadParameter(
                f"{until!r} is not a time in the future; cpg generate follows new flows (for "
                "a past window, capture with hubble observe --since … --until … -o jsonpb and "
                "use cpg replay --since/--until)",
                param_hint="--until",
            )
        left = datetime.fromisoformat(last.replace("Z", "+00:00")) - datetime.now(UTC)
        stop_after = min(stop_after, left.total_seconds()) if stop_after else left.total_seconds()
    try:
        evidence = None
        if not (no_evidence or dry_run):
            evidence = EvidenceSettings(
                root=evidence_dir or default_evidence_root(output_dir),
                max_samples=evidence_samples,
                max_sessions=evidence_sessions,
                redact=evidence_redact,
            )
    except CpgError as exc:
        fail(exc)
    try:
        relay = prepare_relay(
            live.server,
            timeout=live.timeout,
            namespaces=namespaces,
            cluster_dedup=live.cluster_dedup,
            relay_namespace=relay_namespace,
            kubeconfig=kubeconfig,
            context=context,
            # Inline kubeconfig credentials land in a private folder removed on every exit.
            temp_dir=Path(tempfile.mkdtemp(prefix="cpg-kube-")),
        )
    except RelaySetupError as exc:
        what = (
            "--cluster-dedup"
            if exc.field == "cluster_dedup"
            else "--server not given and no port-forward to hubble-relay"
        )
        fail(exc, f"{what}: ")
    if relay.in_cluster is not None:
        log.info("loaded %d cpg-managed policies from the cluster", len(relay.in_cluster))
    if relay.forwarder is not None:
        log.info(
            "port-forward to %s/%s established on %s",
            relay_namespace,
            relay.forwarder.pod,
            relay.server,
        )
    server = relay.server
    settings = LiveSettings(
        server=server,
        output_dir=output_dir,
        options=attrs.evolve(request.aggregate_options(), since=first, until=last),
        since=first,
        evidence_interval=opt.validated(
            lambda: duration_seconds(evidence_interval, "evidence_interval", maximum=86400)
        ),
        min_flows=min_flows,
        kustomize=kustomize,
        namespaces=tuple(namespaces),
        tls=TLSSettings(
            tls or bool(tls_ca_cert or tls_client_cert),
            tls_ca_cert,
            tls_client_cert,
            tls_client_key,
            tls_server_name,
        ),
        timeout=live.timeout,
        flush_interval=live.flush_interval,
        duration=stop_after,
        evidence=evidence,
        dry_run=dry_run,
        diff=not no_diff,
        in_cluster=relay.in_cluster,
    )
    capture = LiveCapture(settings)
    try:
        with GenerateProgress(capture, show=on_terminal(quiet)) as progress:
            result = asyncio.run(_run(capture, relay.close, progress))
    except CpgError as exc:
        fail(exc)
    finally:
        relay.close()
    agg = result.aggregator
    source = f"Hubble Relay {server}"
    warn_about_run(agg, source, l7=l7, include_audit=include_audit)
    failed = bool(result.failed or result.evidence_errors or capture.error)
    code = 1 if failed else 3 if fail_on_infra_drops and agg.infra_drops else 0
    if not code and exit_code and opt.would_change(result.files):
        code = 3
    print_run(
        result,
        source=source,
        output_dir=output_dir,
        dry_run=dry_run,
        evidence=evidence is not None,
        as_json=output == "json",
        exit_code=code,
        extra_json={"reconnects": capture.progress.reconnects},
        extra_lines=opt.redacted_note(evidence_redact and evidence is not None),
        verb="Received",
    )
    if capture.error:
        failure = capture.failure
        why = failure.render(flag) if isinstance(failure, CpgError) else capture.error
        say(f"cpg: error: {why}; what arrived before was written", err=True)
    if code:
        raise typer.Exit(code)


async def _run(
    capture: LiveCapture, release: Callable[[], None], progress: GenerateProgress
) -> ReplayResult:
    loop = asyncio.get_running_loop()
    signals = {"count": 0}

    def on_signal() -> None:
        signals["count"] += 1
        if signals["count"] > 1:
            progress.__exit__(None, None, None)  # the terminal gets its cursor back
            release()  # the port-forward and any credential files go first
            os._exit(130)  # a second Ctrl+C: leave now
        progress.interrupted = True
        capture.stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    return await capture.run(progress.final_flush)
