"""``cpg verify``: do these policies admit the denied flows, and nothing they should not?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, say
from cpg_core import CpgError
from cpg_core.why import FlowFilter
from cpg_io import runs

_Flows = Annotated[
    list[str],
    typer.Argument(
        metavar="FLOWS...|-",
        help="The capture the policies were generated from: files, folders or globs, as "
        "cpg replay reads them, or - for stdin.",
        show_default=False,
    ),
]


_Policies = Annotated[
    Path | None,
    typer.Option(
        "-d",
        "--output-dir",
        "--policies",
        metavar="DIR",
        envvar="CPG_OUTPUT_DIR",
        help="Folder of policy YAML (the -d/--output-dir of cpg replay; default ./policies "
        "unless --cluster is given).",
        show_default=False,
    ),
]


@opt.with_flow_filters
@opt.with_options("verify")
def verify(
    flows: _Flows,
    options: opt.Values,
    policies: _Policies = None,
    flow_filter: FlowFilter = opt.NO_FILTER,
    output: opt.Output = "text",
    evidence_dir: opt.EvidenceDir = None,
) -> None:
    """Check that policies admit every denied flow cpg can express, and no explicitly denied one.

    For each candidate flow (denied for lack of an allow rule) it says which rule admits it or
    why none does; for each flow an explicit deny rule dropped, it says whether these policies
    would allow it (they must not). The endpoint that dropped a flow is taken to enforce policy
    in that direction; an admitted one, what cpg's evidence holds for the rule that admits
    it.

    Exit codes: 0 all admitted and no deny admitted, 3 a candidate not admitted or a deny
    admitted, 4 no flow could be checked (none, or none cpg can express), 1 unreadable input,
    2 bad flags.
    """
    from cpg_core.reports import render
    from cpg_io.sources import describe_source

    default = None if options.check["cluster"] else "policies"
    request = opt.check_request(options, flows, policies=str(policies) if policies else default)
    kubeconfig, context = options.kube_access()
    selection = flow_filter
    from cpg_cli.progress import ReviewProgress, on_terminal

    try:
        with ReviewProgress("checking", show=on_terminal(False)) as progress:
            verified = runs.verify_run(
                request,
                kubeconfig=kubeconfig,
                context=context,
                flow_filter=selection,
                tally=progress.tally,
                evidence=opt.folder_evidence(request.policies, evidence_dir),
            )
    except CpgError as exc:
        fail(exc)
    if verified.stats.malformed:
        say(
            f"cpg: warning: {describe_source(flows[0]) if len(flows) == 1 else 'the inputs'}: "
            f"{verified.stats.malformed} malformed lines skipped",
            err=True,
        )
    text = render(verified.view, output)
    if output in ("json", "yaml"):
        typer.echo(text, nl=False)
    else:
        say(text)
    if not verified.view.report.can_judge:
        raise typer.Exit(4)
    if not verified.view.report.passed:
        raise typer.Exit(3)
