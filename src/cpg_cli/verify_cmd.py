"""``cpg verify``: do these policies admit the denied flows, and nothing they should not?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, say
from cpg_core import CaptureRequest, CpgError
from cpg_core.reports import VerifyView, render
from cpg_io.policy_files import load_policies
from cpg_io.runs import verify_capture
from cpg_io.sources import describe_source

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


_Cluster = Annotated[
    bool,
    typer.Option(
        "--cluster",
        help="Also read the Cilium policies already in the cluster (read-only: needs 'list' "
        "on ciliumnetworkpolicies and ciliumclusterwidenetworkpolicies).",
    ),
]


_IncludeAudit = Annotated[
    bool,
    typer.Option("--include-audit", help="Also check AUDIT-verdict flows, as replay does."),
]


def verify(
    flows: _Flows,
    policies: _Policies = None,
    cluster: _Cluster = False,
    kubeconfig: opt.Kubeconfig = None,
    context: opt.Context = None,
    include_audit: _IncludeAudit = False,
    default_local_cluster: opt.DefaultLocalCluster = "true",
    output: opt.Output = "text",
) -> None:
    """Check that policies admit every denied flow cpg can express, and no explicitly denied one.

    For each candidate flow (denied for lack of an allow rule) it says which rule admits it or
    why none does; for each flow an explicit deny rule dropped, it says whether these policies
    would allow it (they must not). The endpoint that dropped a flow is taken to enforce policy
    in that direction. Exit codes: 0 all admitted and no deny admitted, 3 otherwise, 1 unreadable
    input, 2 bad flags.
    """
    local_default = opt.parse_local_default(default_local_cluster)
    folder = policies if policies is not None or cluster else Path("policies")
    sources = [str(folder)] if folder is not None else []
    try:
        documents = load_policies(folder) if folder is not None else []
        if cluster:
            from cpg_io.kube import cluster_policies

            live = cluster_policies(kubeconfig, context)
            documents += live
            sources.append(f"the cluster ({len(live)})")
        request = CaptureRequest.build(include_audit=include_audit)
        verified = verify_capture(
            flows, documents, request.decide_options(), default_local_cluster=local_default
        )
    except CpgError as exc:
        fail(exc)
    if verified.stats.malformed:
        say(
            f"cpg: warning: {describe_source(flows[0]) if len(flows) == 1 else 'the inputs'}: "
            f"{verified.stats.malformed} malformed lines skipped",
            err=True,
        )
    report = verified.report
    view = VerifyView(report=report, policies=len(documents), origin=" and ".join(sources))
    text = render(view, output)
    typer.echo(text, nl=False) if output == "json" else say(text)
    if not report.passed:
        raise typer.Exit(3)
