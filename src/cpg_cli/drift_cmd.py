"""``cpg drift``: how the cluster drifted away from the policies applied."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.live import follow
from cpg_cli.terminal import fail, say, warn
from cpg_core import CpgError
from cpg_io import runs

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
    output: Annotated[str, opt.output_option("text", "json", help="text, json or yaml.")] = "text",
    log_level: opt.LogLevel = "warning",
) -> None:
    """Show how the cluster drifted away from the policies applied.

    Three findings, from a capture with every verdict or from live traffic (--server):
    traffic a policy of the folder polices and drops (with the rule to add, after you check
    the traffic is wanted); selectors that now reach pods with labels none of the pods the
    policy was made for had (from its evidence); and rules whose evidence shows no flow for
    longer than --stale-after (a rule the capture shows in use is not stale). Writes nothing.

    Exit codes: 0 no drift, 3 drift found, 4 no flow could be judged (none, or none with a
    direction), 1 unreadable input, 2 bad flags.
    """
    from cpg_core.reports import render
    from cpg_core.shadow import DriftRequest

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
            allow_localhost="policy" if check.agent.allow_localhost is False else "always",
        )
    request = opt.validated(
        lambda: DriftRequest.build(check=check, stale_after=stale_after, live=live)
    )
    access = options.access()
    try:
        session = opt.validated(  # an until in the past: exit 2
            lambda: runs.drift(request, access, evidence_dir=evidence_dir)
        )
        result = follow(session, session.run)
    except CpgError as exc:
        fail(exc)
    for problem in result.problems:
        warn(problem)
    if result.stream_error:
        say(f"cpg: warning: the stream ended early: {result.stream_error}", err=True)
    text = render(result.view, output)
    if output in ("json", "yaml"):
        typer.echo(text)
    else:
        say(text)
    if result.view.drift.drifted:
        raise typer.Exit(3)
    if not result.view.drift.can_judge:
        raise typer.Exit(4)
