"""``cpg drift``: how the cluster drifted away from the policies applied."""

from __future__ import annotations

import asyncio
import signal
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, say
from cpg_core import CpgError
from cpg_io import runs

if TYPE_CHECKING:  # loaded when the command runs, not when its flags are listed
    from cpg_core.shadow import DriftRequest
    from cpg_io.hubble import TLSSettings

_Inputs = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[CAPTURE]...",
        help="A capture with every verdict (files, folders or globs, as cpg replay reads "
        "them); or leave it out and give --server to watch live traffic.",
        show_default=False,
    ),
]

_Applied = Annotated[
    Path,
    opt.policy_folder(
        "The policies applied (with their evidence: what they were made from).",
    ),
]

_StaleAfter = Annotated[
    str,
    typer.Option(
        "--stale-after",
        metavar="DURATION",
        help="A rule whose evidence shows no flow for longer than this (e.g. 30d) is stale.",
    ),
]


@opt.with_options("drift")
def drift(
    options: opt.Values,
    inputs: _Inputs = None,
    policies: _Applied = Path("policies"),
    stale_after: _StaleAfter = "30d",
    evidence_dir: opt.EvidenceDir = None,
    output: Annotated[str, opt.output_option("text", "json", help="text or json.")] = "text",
    log_level: opt.LogLevel = "warning",
) -> None:
    """Show how the cluster drifted away from the policies applied.

    Three findings, from a capture with every verdict or from live traffic (--server):
    traffic a policy of the folder polices and drops (with the rule to add, after you check
    the traffic is wanted); selectors that now reach pods with labels none of the pods the
    policy was made for had (from its evidence); and rules whose evidence shows no flow for
    longer than --stale-after (a rule the capture shows in use is not stale). Writes nothing.

    Exit codes: 0 no drift, 3 drift found, 1 unreadable input, 2 bad flags.
    """
    from cpg_core.reports import render
    from cpg_core.shadow import DriftRequest
    from cpg_io.runs import rfc3339, utc_now

    opt.setup_logging(log_level)
    server = options.run["server"]
    if bool(inputs) == bool(server):
        raise typer.BadParameter(
            "give a capture or --server RELAY (live), not both and not neither",
            param_hint="CAPTURE",
        )
    check = opt.check_request(options, inputs or [str(server)], policies=policies)
    live = None
    if server:  # a live capture takes the check's audit and localhost choices too
        live = opt.run_request(
            options,
            include_audit=check.include_audit,
            allow_localhost=options.check["allow_localhost"],
        )
    request = opt.validated(
        lambda: DriftRequest.build(check=check, stale_after=stale_after, live=live)
    )
    now = rfc3339(utc_now())
    try:
        if live is None:
            result = runs.drift_run(request, now=now, evidence_dir=evidence_dir)
        else:
            opt.validated(lambda: live.live_window(now))
            result = _watch(request, now, options.tls(), evidence_dir)
    except CpgError as exc:
        fail(exc)
    for problem in result.problems:
        say(f"cpg: warning: {problem}", err=True)
    if result.stream_error:
        say(f"cpg: warning: the stream ended early: {result.stream_error}", err=True)
    text = render(result.view, output)
    if output == "json":
        typer.echo(text)
    else:
        say(text)
    if result.view.drift.drifted:
        raise typer.Exit(3)


def _watch(
    request: DriftRequest, now: str, tls: TLSSettings, evidence_dir: Path | None
) -> runs.DriftRun:
    from cpg_io.errors import RelaySetupError
    from cpg_io.runs import rfc3339, utc_now

    assert request.live is not None
    try:
        relay = runs.connect_relay(
            request.live, temp_dir=Path(tempfile.mkdtemp(prefix="cpg-kube-"))
        )
    except RelaySetupError as exc:
        fail(exc, "--server: ")
    try:
        session = runs.drift_capture(request, relay, now=now, tls=tls, evidence_dir=evidence_dir)

        async def watched() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, session.stop.set)
            await session.run()

        asyncio.run(watched())
        return session.result(rfc3339(utc_now()))
    finally:
        relay.close()
