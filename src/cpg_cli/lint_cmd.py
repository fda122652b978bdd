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
    list[str] | None,
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


_AdmissionPolicy = Annotated[
    bool,
    typer.Option(
        "--admission-policy",
        help="Print lint's rules as a ValidatingAdmissionPolicy with its ConfigMaps and "
        "bindings (Kubernetes 1.30+; kubectl apply -f -), and exit: the API server then "
        "checks every Cilium policy a tenant applies. The Deny binding warns until you flip "
        "it; the header lists the rules left to lint and why. With --cilium-version, the "
        "checks of that release; with --pod-cidr, CIDR rules inside the pod range (CPG007).",
    ),
]


@opt.with_options("lint")
def lint(
    options: opt.Values,
    paths: _Paths = None,
    pod_cidr: _PodCidr = [],  # noqa: B006 - Typer reads the default, never mutates it
    output: Annotated[
        str,
        opt.output_option(
            "text", "json", "sarif", help="text, json, yaml, or sarif (GitHub code scanning)."
        ),
    ] = "text",
    list_rules: _ListRules = False,
    admission_policy: _AdmissionPolicy = False,
) -> None:
    """Check Cilium policy and Kubernetes NetworkPolicy YAML, cpg's or anyone's.

    Errors are what Cilium, or for a NetworkPolicy the API server, would refuse: the CRD schema cpg ships (with its cidr format and
    the fields it does not know), Kubernetes label syntax, and the checks of Cilium's own
    policy parser (peer kinds that cannot share a rule, ICMP beside ports, CIDR exceptions
    outside their CIDR, L7 rules where Cilium takes none, regular expressions Go refuses,
    a top-level description, reserved:init in a namespaced policy, …), a NetworkPolicy's
    fields as Kubernetes validates them, and YAML two readers read differently (a key given
    twice, an unquoted y or n, a number beyond 64 bits). Warnings are what
    Cilium accepts but rarely means: an empty selector, the world opened, a CIDR inside the
    pod CIDR, an L4 rule beside an L7 rule on the same peer and port, toFQDNs without a DNS
    rule, duplicated rules, deprecated fields, the no-op audit-mode annotation. With
    --cluster: a selector that selects nothing, and the cluster's policies marked
    Valid=False. Each finding has a code and a fix (--list-rules prints them all).

    Exit codes: 0 no findings, 3 findings, 1 unreadable input, 2 bad flags.
    """
    from cpg_core.lint import parse_version, supported_text
    from cpg_core.reports import render

    cilium_version = str(options.check["cilium_version"])
    version = parse_version(cilium_version)
    if version is None:
        raise typer.BadParameter(
            f"{cilium_version!r} is not a Cilium release cpg lint knows ({supported_text()})",
            param_hint="--cilium-version",
        )

    for cidr in pod_cidr:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise typer.BadParameter(
                f"{cidr!r} is not a CIDR (e.g. 10.244.0.0/16)", param_hint="--pod-cidr"
            ) from None
    if admission_policy:
        from cpg_core.reports import admission_yaml

        typer.echo(admission_yaml(version=version, pod_cidrs=pod_cidr), nl=False)
        raise typer.Exit()
    if not paths:
        raise typer.BadParameter(
            "give the policy files or folders to lint (or --admission-policy)",
            param_hint="FILE|DIR...",
        )
    kubeconfig, context = options.kube_access()
    try:
        ran = runs.lint_run(
            paths,
            pod_cidrs=pod_cidr,
            cluster=options.check["cluster"],
            kubeconfig=kubeconfig,
            context=context,
            cilium_version=version,
            declarations=options.check["declarations"],
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
