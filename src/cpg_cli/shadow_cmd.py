"""``cpg shadow``: judge proposed policies on live traffic before applying them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.live import follow, leaving
from cpg_cli.terminal import fail, say, warn
from cpg_core import CpgError
from cpg_io import runs

if TYPE_CHECKING:  # loaded when the command runs, not when its flags are listed
    from cpg_core.shadow import WouldBreak

_Proposed = Annotated[
    Path,
    opt.policy_folder(
        "The proposed policies (the -d of cpg replay or generate).",
    ),
]

_Report = Annotated[
    Path | None,
    typer.Option(
        "--report",
        metavar="FILE",
        help="Rewrite the plan so far (cpg plan -o json's shape) to FILE at every flush, so a "
        "long run can be read while it goes (cpg report --plan FILE shows it).",
        show_default=False,
    ),
]


@opt.with_options("shadow")
def shadow(
    options: opt.Values,
    policies: _Proposed = Path("policies"),
    report: _Report = None,
    evidence_dir: opt.EvidenceDir = None,
    output: Annotated[
        str, opt.output_option("text", "json", help="The final plan: text, json or yaml.")
    ] = "text",
    quiet: opt.Quiet = False,
    log_level: opt.LogLevel = "warning",
) -> None:
    """Judge proposed policies on live traffic, before applying them (a staged policy).

    Streams every verdict from Hubble Relay and checks each flow against the proposed
    policies with cpg plan's matcher: traffic that works today and the proposal would drop
    is printed as it first happens (with the policy, a sample and the fix), denied flows the
    proposal admits are counted. Stops on Ctrl+C, SIGTERM, --duration or --until and prints
    the plan of everything seen: the same as cpg plan on those flows as a file.

    Exit codes: 0 nothing would break, 3 something would break, 4 no forwarded traffic was seen
    to judge, 1 relay or policy errors, 2 bad flags.
    """
    from cpg_cli.progress import ShadowProgress, on_terminal
    from cpg_core.reports import render
    from cpg_core.shadow import ShadowRequest

    opt.setup_logging(log_level)
    server = options.run["server"]
    check = opt.check_request(options, [server or "hubble-relay"], policies=policies)
    report_path = str(report) if report is not None else None
    # The live capture takes the check's audit and localhost choices too.
    live = opt.run_request(
        options,
        include_audit=check.include_audit,
        allow_localhost="policy" if check.agent.allow_localhost is False else "always",
    )
    request = ShadowRequest(check=check, live=live, report=report_path)
    access = options.access()
    try:
        # With -o json, stdout holds the final plan alone; what breaks as it happens goes
        # to stderr.
        capture = opt.validated(  # an until in the past: exit 2
            lambda: runs.shadow(
                request,
                access,
                evidence_dir=evidence_dir,
                on_break=lambda items: _announce(items, output == "json"),
            )
        )
    except CpgError as exc:
        fail(exc)
    server_name = capture.relay.server if capture.relay is not None else str(server)
    for problem in capture.problems:
        warn(problem)
    try:
        with ShadowProgress(capture, show=on_terminal(quiet)) as progress:
            view = follow(capture, capture.run, on_leave=leaving(progress))
    except CpgError as exc:
        fail(exc)
    if capture.error:
        say(f"cpg: warning: the stream ended early: {capture.error}", err=True)
    say(f"cpg: shadow of {server_name}: {capture.progress.flows:,} flows judged", err=True)
    text = render(view, output)
    if output in ("json", "yaml"):
        typer.echo(text)
    else:
        say(text)
    code, words = runs.shadow_verdict(view)
    if words:
        say(f"cpg: {words}", err=True)
    if code:
        raise typer.Exit(code)


def _announce(items: list[WouldBreak], to_stderr: bool) -> None:
    from cpg_core.reports import would_break_text

    stamp = time.strftime("%H:%M:%S")
    kinds = f"{len(items)} new kind{'s' if len(items) != 1 else ''} of traffic"
    say(f"{stamp} WOULD BREAK: {kinds} that works today:\n{would_break_text(items)}", err=to_stderr)
