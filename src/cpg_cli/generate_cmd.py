"""``cpg generate``: watch Hubble Relay and write policies as denied flows arrive."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail
from cpg_core import CpgError
from cpg_io import runs

if TYPE_CHECKING:  # what runs imports when the command runs, not when its flags are listed
    from cpg_cli.progress import GenerateProgress
    from cpg_core import RunRequest
    from cpg_io.hubble import TLSSettings
    from cpg_io.kube import RelayConnection

log = logging.getLogger("cpg")


@opt.with_options("generate")
def generate(
    options: opt.Values,
    output_dir: opt.OutputDir = Path("policies"),
    evidence_dir: opt.EvidenceDir = None,
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
    from cpg_cli.progress import GenerateProgress, on_terminal
    from cpg_cli.report import print_run, warn_about_run

    opt.setup_logging(log_level)
    request = opt.run_request(options)
    now = runs.rfc3339(runs.utc_now())
    opt.validated(lambda: request.live_window(now))  # an until in the past: exit 2 now
    kubeconfig, context = options.kube_access()
    relay, settings = _connect(
        request, output_dir, evidence_dir, options.tls(), now, kubeconfig, context
    )
    capture = runs.LiveCapture(settings)
    try:
        with GenerateProgress(capture, show=on_terminal(quiet)) as progress:
            result = asyncio.run(_run(capture, relay.close, progress))
    except CpgError as exc:
        fail(exc)
    finally:
        relay.close()
    source = f"Hubble Relay {relay.server}"
    warn_about_run(result.aggregator, source, request)
    code = runs.exit_code(result, request, stream_error=bool(capture.error))
    extra = {"reconnects": capture.progress.reconnects}
    print_run(
        result,
        request=request,
        source=source,
        output_dir=output_dir,
        exit_code=code,
        as_json=output == "json",
        extra_json=extra,
        verb="Received",
        live=capture,
        evidence_dir=evidence_dir,
    )
    if code:
        raise typer.Exit(code)


def _connect(
    request: RunRequest,
    output_dir: Path,
    evidence_dir: Path | None,
    tls: TLSSettings,
    now: str,
    kubeconfig: Path | None,
    context: str | None,
) -> tuple[RelayConnection, runs.LiveSettings]:
    """The relay (port-forwarded when no --server) and the capture's settings; exit 1 naming
    what failed."""
    from cpg_io.errors import RelaySetupError

    try:
        # Inline kubeconfig credentials land in a private folder removed on every exit.
        relay = runs.connect_relay(
            request,
            kubeconfig=kubeconfig,
            context=context,
            temp_dir=Path(tempfile.mkdtemp(prefix="cpg-kube-")),
        )
        settings = runs.live_settings(
            request, output_dir, relay, now=now, tls=tls, evidence_dir=evidence_dir
        )
    except RelaySetupError as exc:
        what = (
            "--cluster-dedup"
            if exc.field == "cluster_dedup"
            else "--server not given and no port-forward to hubble-relay"
        )
        fail(exc, f"{what}: ")
    except CpgError as exc:
        fail(exc)
    if relay.in_cluster is not None:
        log.info("loaded %d cpg-managed policies from the cluster", len(relay.in_cluster))
    if relay.forwarder is not None:
        log.info(
            "port-forward to %s/%s established on %s",
            request.live.relay_namespace,
            relay.forwarder.pod,
            relay.server,
        )
    return relay, settings


async def _run(
    capture: runs.LiveCapture, release: Callable[[], None], progress: GenerateProgress
) -> runs.RunResult:
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
