"""``cpg generate``: watch Hubble Relay and write policies as denied flows arrive."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from cpg_cli import options as opt
from cpg_cli.live import follow, leaving
from cpg_cli.terminal import fail
from cpg_core import CpgError
from cpg_io import runs

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

    Exit codes: 0 stopped with everything written, 1 the relay could not be followed or a
    file could not be written, 2 bad flags, 3 --fail-on-infra-drops and infrastructure or
    transient drops were seen, or --dry-run --exit-code and a file would change.
    """
    from cpg_cli.progress import GenerateProgress, on_terminal
    from cpg_cli.report import print_run, warn_about_run

    opt.setup_logging(log_level)
    request = opt.run_request(options)
    access = options.access()
    try:
        capture = opt.validated(  # an until in the past: exit 2
            lambda: runs.live(request, access, output_dir, evidence_dir=evidence_dir)
        )
    except CpgError as exc:
        fail(exc)
    server = capture.relay.server if capture.relay is not None else request.live.server
    try:
        with GenerateProgress(capture, show=on_terminal(quiet)) as progress:

            def interrupted() -> None:
                progress.interrupted = True

            result = follow(
                capture,
                lambda: capture.run(progress.final_flush),
                on_stop=interrupted,
                on_leave=leaving(progress),
            )
    except CpgError as exc:
        fail(exc)
    source = f"Hubble Relay {server}"
    warn_about_run(result.aggregator, source, request)
    code = runs.exit_code(result, request, stream_error=bool(capture.error))
    extra = {"reconnects": capture.progress.reconnects}
    print_run(
        result,
        request=request,
        source=source,
        output_dir=output_dir,
        exit_code=code,
        as_json=output in ("json", "yaml"),
        machine_format=output,
        extra_json=extra,
        verb="Received",
        live=capture,
        evidence_dir=evidence_dir,
        relay=server,
    )
    if code:
        raise typer.Exit(code)
