"""``cpg generate``: watch Hubble Relay and write policies as denied flows arrive."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from cpg_cli.replay_cmd import (
    LOG_LEVELS,
    OutputFormat,
    build_options,
    check_namespaces,
    setup_logging,
    split_values,
)
from cpg_cli.report import print_run, warn_about_run
from cpg_core.explain import parse_duration
from cpg_io.evidence_store import default_evidence_root
from cpg_io.hubble import RelayError, TLSSettings
from cpg_io.kube import KubeError
from cpg_io.live import LiveCapture, LiveSettings
from cpg_io.pipeline import EvidenceSettings, ReplayResult
from cpg_io.store import StoreError

log = logging.getLogger("cpg")


def _seconds(text: str, flag: str, *, positive: bool = True) -> float:
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=flag) from None
    if positive and value <= 0:
        raise typer.BadParameter(f"{text!r} must be more than zero", param_hint=flag)
    return value


def _status_line(capture: LiveCapture) -> None:
    elapsed = time.monotonic() - capture.progress.started
    totals = capture.totals
    rate = capture.progress.flows / max(1.0, elapsed)
    sys.stderr.write(
        f"\r\x1b[2Kcpg: {capture.progress.flows} flows ({rate:.0f}/s), "
        f"{totals.candidates} candidates, {capture.progress.policies_written} policies written, "
        f"{totals.infra_drops} infra drops"
    )
    sys.stderr.flush()


def generate(
    server: Annotated[
        str | None,
        typer.Option(
            "-s",
            "--server",
            help="Hubble Relay address host:port. Without it, cpg finds a running "
            "k8s-app=hubble-relay pod (--relay-namespace) and port-forwards to it through the "
            "Kubernetes API (--kubeconfig, --context).",
            show_default=False,
        ),
    ] = None,
    namespace: Annotated[
        list[str],
        typer.Option(
            "-n",
            "--namespace",
            help="Only flows from or to pods in this namespace, "
            "and only policies for it (repeat or comma-separate).",
            show_default=False,
        ),
    ] = [],  # noqa: B006
    all_namespaces: Annotated[
        bool, typer.Option("-A", "--all-namespaces", help="Every namespace (the default).")
    ] = False,
    output_dir: Annotated[
        Path, typer.Option("-o", "--output-dir", help="Where policies are written.")
    ] = Path("policies"),
    tls: Annotated[bool, typer.Option("--tls", help="Connect with TLS.")] = False,
    tls_ca_cert: Annotated[
        Path | None,
        typer.Option("--tls-ca-cert", help="CA bundle to trust (PEM).", show_default=False),
    ] = None,
    tls_client_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-client-cert", help="Client certificate (PEM) for mutual TLS.", show_default=False
        ),
    ] = None,
    tls_client_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-client-key", help="Client key (PEM) for mutual TLS.", show_default=False
        ),
    ] = None,
    tls_server_name: Annotated[
        str | None,
        typer.Option(
            "--tls-server-name",
            help="Name to expect in the relay's certificate.",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        str, typer.Option("--timeout", help="How long to wait for the connection.")
    ] = "10s",
    flush_interval: Annotated[
        str, typer.Option("--flush-interval", help="How often policies and evidence are written.")
    ] = "5s",
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration", help="Stop by itself after this long (e.g. 10m).", show_default=False
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Kubeconfig (for --cluster-dedup).", show_default=False),
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="Kubeconfig context.", show_default=False)
    ] = None,
    cluster_dedup: Annotated[
        bool,
        typer.Option(
            "--cluster-dedup",
            help="Do not write policies the cluster already has an equivalent cpg-managed "
            "policy for (lists ciliumnetworkpolicies labelled app.kubernetes.io/managed-by=cpg).",
        ),
    ] = False,
    relay_namespace: Annotated[
        str, typer.Option("--relay-namespace", help="Namespace of hubble-relay.")
    ] = "kube-system",
    include_audit: Annotated[
        bool, typer.Option("--include-audit", help="Also turn AUDIT-verdict flows into rules.")
    ] = False,
    ignore_protocol: Annotated[
        list[str],
        typer.Option(
            "--ignore-protocol",
            help="Skip flows of this L4 protocol; repeatable.",
            show_default=False,
        ),
    ] = [],  # noqa: B006
    ignore_drop_reason: Annotated[
        list[str],
        typer.Option(
            "--ignore-drop-reason",
            metavar="REASON",
            help="Skip drops with this DropReason name; repeatable.",
            show_default=False,
        ),
    ] = [],  # noqa: B006
    l7: Annotated[
        bool, typer.Option("--l7", help="HTTP and DNS rules from L7 records (see README).")
    ] = False,
    l7_collapse_paths: Annotated[
        bool, typer.Option("--l7-collapse-paths", help="With --l7: ids in paths as wildcards.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; print a diff of what would change.")
    ] = False,
    no_diff: Annotated[bool, typer.Option("--no-diff", help="With --dry-run, no diffs.")] = False,
    evidence_dir: Annotated[
        Path | None, typer.Option("--evidence-dir", help="Evidence root.", show_default=False)
    ] = None,
    no_evidence: Annotated[bool, typer.Option("--no-evidence", help="Record no evidence.")] = False,
    evidence_samples: Annotated[
        int, typer.Option("--evidence-samples", min=0, help="Sample flows kept per rule.")
    ] = 10,
    evidence_sessions: Annotated[
        int, typer.Option("--evidence-sessions", min=0, help="Runs kept per policy's evidence.")
    ] = 10,
    fail_on_infra_drops: Annotated[
        bool,
        typer.Option(
            "--fail-on-infra-drops", help="Exit 3 when infrastructure or transient drops were seen."
        ),
    ] = False,
    output: Annotated[
        OutputFormat, typer.Option("--output", help="text or json report.", case_sensitive=False)
    ] = OutputFormat.text,
    log_level: Annotated[
        str, typer.Option("--log-level", help=f"One of {', '.join(LOG_LEVELS)}.")
    ] = "warning",
) -> None:
    """Watch Hubble Relay and write policies for denied flows as they arrive.

    Streams DROPPED flows (and AUDIT with --include-audit) from observer.Observer/GetFlows,
    writes changed policies and evidence every --flush-interval, and stops on Ctrl+C or
    SIGTERM (final flush, then the report) or after --duration. A second Ctrl+C exits at once.
    A lost stream is resumed from the last flow's time, with growing pauses; flows with a uuid
    are never counted twice.
    """
    if log_level.lower() not in LOG_LEVELS:
        raise typer.BadParameter(
            f"{log_level!r} is not one of {', '.join(LOG_LEVELS)}", param_hint="--log-level"
        )
    setup_logging(log_level.lower())
    namespaces = split_values(namespace)
    check_namespaces(namespaces, all_namespaces)
    connect_timeout = _seconds(timeout, "--timeout")
    interval = _seconds(flush_interval, "--flush-interval")
    stop_after = _seconds(duration, "--duration") if duration is not None else None
    options = build_options(
        include_audit=include_audit,
        ignore_protocol=ignore_protocol,
        ignore_drop_reason=ignore_drop_reason,
        namespaces=namespaces,
        max_samples=evidence_samples if not (no_evidence or dry_run) else 0,
        l7=l7,
        l7_collapse_paths=l7_collapse_paths,
    )
    try:
        evidence = None
        if not (no_evidence or dry_run):
            evidence = EvidenceSettings(
                root=evidence_dir or default_evidence_root(),
                max_samples=evidence_samples,
                max_sessions=evidence_sessions,
            )
    except StoreError as exc:
        typer.echo(f"cpg: error: {exc}", err=True)
        raise typer.Exit(1) from None
    in_cluster = None
    if cluster_dedup:
        try:
            from cpg_io.kube import api_client, cpg_managed_policies

            in_cluster = cpg_managed_policies(
                api_client(kubeconfig, context, timeout=connect_timeout), namespaces or None
            )
        except KubeError as exc:
            typer.echo(f"cpg: error: --cluster-dedup: {exc}", err=True)
            raise typer.Exit(1) from None
        log.info("loaded %d cpg-managed policies from the cluster", len(in_cluster))
    forwarder = None
    if server is None:
        try:
            from cpg_io.kube import api_client, forward_to_relay

            api = api_client(kubeconfig, context, timeout=connect_timeout)
            forwarder = forward_to_relay(api, relay_namespace, connect_timeout)
        except KubeError as exc:
            typer.echo(
                f"cpg: error: --server not given and no port-forward to hubble-relay: {exc}",
                err=True,
            )
            raise typer.Exit(1) from None
        server = forwarder.address
        log.info("port-forward to %s/%s established on %s", relay_namespace, forwarder.pod, server)
    settings = LiveSettings(
        server=server,
        output_dir=output_dir,
        options=options,
        namespaces=tuple(namespaces),
        tls=TLSSettings(
            tls or bool(tls_ca_cert or tls_client_cert),
            tls_ca_cert,
            tls_client_cert,
            tls_client_key,
            tls_server_name,
        ),
        timeout=connect_timeout,
        flush_interval=interval,
        duration=stop_after,
        evidence=evidence,
        dry_run=dry_run,
        diff=not no_diff,
        in_cluster=in_cluster,
    )
    capture = LiveCapture(settings)
    try:
        result = asyncio.run(_run(capture))
    except RelayError as exc:
        typer.echo(f"cpg: error: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        if forwarder is not None:
            forwarder.close()
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    agg = result.aggregator
    source = f"Hubble Relay {server}"
    warn_about_run(agg, source, l7=l7, include_audit=include_audit)
    failed = bool(result.failed or result.evidence_errors or capture.error)
    code = 1 if failed else 3 if fail_on_infra_drops and agg.infra_drops else 0
    print_run(
        result,
        source=source,
        output_dir=output_dir,
        dry_run=dry_run,
        evidence=evidence is not None,
        as_json=output is OutputFormat.json,
        exit_code=code,
        extra_json={"reconnects": capture.progress.reconnects},
        verb="Received",
    )
    if capture.error:
        typer.echo(f"cpg: error: {capture.error}; what arrived before was written", err=True)
    if code:
        raise typer.Exit(code)


async def _run(capture: LiveCapture) -> ReplayResult:
    loop = asyncio.get_running_loop()
    signals = {"count": 0}

    def on_signal() -> None:
        signals["count"] += 1
        if signals["count"] > 1:
            os._exit(130)  # a second Ctrl+C: leave now
        capture.stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    status = _status_line if sys.stderr.isatty() else None
    return await capture.run(status)
