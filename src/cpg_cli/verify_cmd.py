"""``cpg verify``: do these policies admit the denied flows, and nothing they should not?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cpg_cli.replay_cmd import OutputFormat
from cpg_core.decide import DecideOptions
from cpg_io.kube import KubeError
from cpg_io.sources import SourceError, describe_source
from cpg_io.verify import (
    PolicyLoadError,
    VerifyResult,
    load_policies,
    summary_line,
    verify_capture,
    verify_json,
)


def print_verify(result: VerifyResult, *, policies: int, origin: str) -> None:
    typer.echo(
        f"Checked {result.total('candidate')} candidate and {result.total('explicit_deny')} "
        f"explicit-deny flows against {policies} policies from {origin}"
    )
    for check in result.checks:
        flows = f"({check.count} flow{'s' if check.count != 1 else ''})"
        if check.kind == "explicit_deny":
            label = "DANGER" if check.result.allowed else "still denied"
            why = (
                f"{check.result.reason}, but an explicit deny rule dropped this traffic"
                if check.result.allowed
                else "no policy here allows it"
            )
        else:
            label = "admitted" if check.result.allowed else "NOT admitted"
            why = check.result.reason
        typer.echo(f"  {label:<13} {check.subject} {flows}: {why}")
    typer.echo(summary_line(result))


def verify(
    flows: Annotated[
        str,
        typer.Argument(
            metavar="FLOWS|-",
            help="The capture the policies were generated from.",
            show_default=False,
        ),
    ],
    policies: Annotated[
        Path | None,
        typer.Option(
            "--policies",
            "-p",
            help="Folder of policy YAML (the --output-dir of cpg replay; default ./policies "
            "unless --cluster is given).",
            show_default=False,
        ),
    ] = None,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="Also read the Cilium policies already in the cluster (read-only: needs 'list' "
            "on ciliumnetworkpolicies and ciliumclusterwidenetworkpolicies).",
        ),
    ] = False,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig",
            help="Kubeconfig for --cluster (default $KUBECONFIG, ~/.kube/config).",
            show_default=False,
        ),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option("--context", help="Kubeconfig context for --cluster.", show_default=False),
    ] = None,
    include_audit: Annotated[
        bool,
        typer.Option("--include-audit", help="Also check AUDIT-verdict flows, as replay does."),
    ] = False,
    output: Annotated[
        OutputFormat,
        typer.Option("--output", help="text (for people) or json.", case_sensitive=False),
    ] = OutputFormat.text,
) -> None:
    """Check that policies admit every denied flow cpg can express, and no explicitly denied one.

    For each candidate flow (denied for lack of an allow rule) it says which rule admits it or
    why none does; for each flow an explicit deny rule dropped, it says whether these policies
    would allow it (they must not). The endpoint that dropped a flow is taken to enforce policy
    in that direction. Exit codes: 0 all admitted and no deny admitted, 3 otherwise, 1 unreadable
    input, 2 bad flags.
    """
    folder = policies if policies is not None or cluster else Path("policies")
    sources = [str(folder)] if folder is not None else []
    try:
        documents = load_policies(folder) if folder is not None else []
        if cluster:
            from cpg_io.kube import api_client, list_cilium_policies

            live = list_cilium_policies(api_client(kubeconfig, context))
            documents += live
            sources.append(f"the cluster ({len(live)})")
        result = verify_capture(flows, documents, DecideOptions(include_audit=include_audit))
    except (PolicyLoadError, SourceError, KubeError) as exc:
        typer.echo(f"cpg: error: {exc}", err=True)
        raise typer.Exit(1) from None
    if result.stats.malformed:
        typer.echo(
            f"cpg: warning: {describe_source(flows)}: {result.stats.malformed} malformed lines skipped",
            err=True,
        )
    if output is OutputFormat.json:
        typer.echo(json.dumps(verify_json(result), indent=2, ensure_ascii=False))
    else:
        print_verify(result, policies=len(documents), origin=" and ".join(sources))
    if not result.passed:
        raise typer.Exit(3)
