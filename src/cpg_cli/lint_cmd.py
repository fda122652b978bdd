"""``cpg lint``: check CiliumNetworkPolicy YAML before it reaches a cluster."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, say
from cpg_core import CpgError
from cpg_io import runs

_Paths = Annotated[
    list[str],
    typer.Argument(
        metavar="FILE|DIR...",
        help="Policy files, or folders searched for *.yaml and *.yml (any YAML: documents "
        "that are not Cilium policies are left alone).",
        show_default=False,
    ),
]

_PodCidr = Annotated[
    list[str],
    typer.Option(
        "--pod-cidr",
        metavar="CIDR",
        help="The cluster's pod CIDR (repeatable): a CIDR rule inside it is flagged (CPG007).",
        show_default=False,
    ),
]

_Cluster = Annotated[
    bool,
    typer.Option(
        "--cluster",
        help="Also flag policies whose endpointSelector selects no pod in their namespace today "
        "(read-only: 'list' on pods in those namespaces).",
    ),
]


def _list_rules(value: bool) -> None:
    if value:
        from cpg_core.lint import RULES

        for rule in RULES.values():
            typer.echo(f"{rule.code} {rule.name} ({rule.level}): {rule.summary}")
            typer.echo(f"    fix: {rule.fix}")
        raise typer.Exit()


_ListRules = Annotated[
    bool,
    typer.Option(
        "--list-rules",
        help="Print every rule with its code, level and fix, and exit.",
        callback=_list_rules,
        is_eager=True,
    ),
]


def lint(
    paths: _Paths,
    pod_cidr: _PodCidr = [],  # noqa: B006 - Typer reads the default, never mutates it
    cluster: _Cluster = False,
    kubeconfig: opt.Kubeconfig = None,
    context: opt.Context = None,
    output: Annotated[
        str,
        opt.output_option(
            "text", "json", "sarif", help="text, json, or sarif (GitHub code scanning)."
        ),
    ] = "text",
    list_rules: _ListRules = False,
) -> None:
    """Check CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy YAML, cpg's or anyone's.

    The CRD schema cpg ships, Kubernetes label syntax, and cpg's rules: an empty selector,
    the world opened, a CIDR inside the pod CIDR, an L4 rule beside an L7 rule on the same
    peer and port, ports out of range, toFQDNs without a DNS rule, duplicated rules, and
    with --cluster a selector that selects nothing. Each finding has a code and a fix
    (--list-rules prints them all).

    Exit codes: 0 no findings, 3 findings, 1 unreadable input, 2 bad flags.
    """
    from cpg_core.reports import render

    for cidr in pod_cidr:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise typer.BadParameter(
                f"{cidr!r} is not a CIDR (e.g. 10.244.0.0/16)", param_hint="--pod-cidr"
            ) from None
    try:
        ran = runs.lint_run(
            paths, pod_cidrs=pod_cidr, cluster=cluster, kubeconfig=kubeconfig, context=context
        )
    except CpgError as exc:
        fail(exc)
    text = render(ran.view, output)
    if output in ("json", "sarif"):
        typer.echo(text)
    else:
        say(text)
    if ran.view.findings:
        raise typer.Exit(3)
