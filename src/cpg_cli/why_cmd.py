"""``cpg why`` and ``cpg trace``: which policy decided a flow, and what would admit it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, say, warn
from cpg_core import CpgError
from cpg_core.reports import formats
from cpg_core.why import FlowFilter
from cpg_io import runs

if TYPE_CHECKING:  # loaded when the command runs, not when its flags are listed
    from cpg_io.runs import WhyRun

_Capture = Annotated[
    list[str],
    typer.Argument(
        metavar="CAPTURE...",
        help="The capture: files, folders or globs, as cpg replay reads them, or -.",
        show_default=False,
    ),
]
_Policies = Annotated[
    Path,
    opt.policy_folder(
        "cpg's policy folder: judged, or with --current/--cluster checked for a policy that "
        "already admits the flow.",
    ),
]
_Output = Annotated[
    str, opt.output_option(*formats("why"), help="text (for people), json or yaml (for machines).")
]


def _show(answered: WhyRun, output: str) -> None:
    from cpg_core.reports import render

    for problem in answered.problems:
        warn(problem)
    text = render(answered.view, output)
    if output in ("json", "yaml"):
        typer.echo(text)
    else:
        say(text)
    if any(not why.allowed for why in answered.view.answers):
        raise typer.Exit(3)


@opt.with_flow_filters
@opt.with_options("why")
def why(
    capture: _Capture,
    options: opt.Values,
    policies: _Policies = Path("policies"),
    flow_filter: FlowFilter = opt.NO_FILTER,
    output: _Output = "text",
    evidence_dir: opt.EvidenceDir = None,
) -> None:
    """Say why each kind of flow the filters select was denied, and what would admit it.

    For every distinct flow (denied ones unless --verdict says otherwise): the verdict and
    drop reason Hubble recorded (an infrastructure or transient drop is named as such, with
    its fix), the policies that police the endpoint in that direction, each of their rules
    that could have admitted it and exactly what it misses (the peer label, namespace or
    cluster, the port, the L7 rule; nearest first), deny rules that match (they win), and
    the rule that would admit it as YAML to paste. Judged against -d DIR, or --current or
    --cluster (then -d says whether cpg's policy already admits it: apply it). An admitted
    flow says what cpg's evidence holds for the rule that admits it.

    Exit codes: 0 every flow is admitted by the policies judged, 3 some flow is not, 1
    unreadable input, 2 bad flags.
    """
    request = opt.check_request(options, capture, policies=policies)
    kubeconfig, context = options.kube_access()
    selection = flow_filter
    from cpg_cli.progress import ReviewProgress, on_terminal

    try:
        with ReviewProgress("judging", show=on_terminal(False)) as progress:
            answered = runs.why_run(
                request,
                selection,
                kubeconfig=kubeconfig,
                context=context,
                tally=progress.tally,
                evidence=opt.folder_evidence(policies, evidence_dir),
            )
    except CpgError as exc:
        fail(exc)
    _show(answered, output)


_From = Annotated[
    str,
    typer.Option(
        "--from",
        metavar="NS/WORKLOAD|NS:K=V,…|ENTITY|IP",
        help="The source: NS/WORKLOAD (app=WORKLOAD), NS:key=value[,key=value], an entity "
        "(world, host, remote-node, kube-apiserver…) or an IP; @CLUSTER for ClusterMesh.",
        show_default=False,
    ),
]
_To = Annotated[
    str,
    typer.Option(
        "--to",
        metavar="NS/WORKLOAD|NS:K=V,…|ENTITY|IP",
        help="The destination, spelled as --from.",
        show_default=False,
    ),
]
_Port = Annotated[
    str,
    typer.Option(
        "--port",
        metavar="PORT[/PROTO]",
        help="8080/TCP (TCP when left out), 53/UDP, 8/ICMP (an ICMP type; ICMP is IPv4, as "
        "policies spell it), 128/ICMPv6.",
        show_default=False,
    ),
]


@opt.with_options("trace")
def trace(
    source: _From,
    destination: _To,
    port: _Port,
    options: opt.Values,
    method: Annotated[str, typer.Option("--method", help="An HTTP method (L7 rules).")] = "",
    path: Annotated[str, typer.Option("--path", help="An HTTP path (L7 rules).")] = "",
    dns: Annotated[
        str, typer.Option("--dns", metavar="NAME", help="A DNS query (DNS rules).")
    ] = "",
    node_label: Annotated[
        list[str] | None,
        typer.Option(
            "--node-label",
            metavar="KEY=VALUE",
            help="A label of the node, when an end is host (repeat for more): a host policy's "
            "nodeSelector is matched against the node's labels (with --host-firewall).",
            show_default=False,
        ),
    ] = None,
    policies: _Policies = Path("policies"),
    output: _Output = "text",
    evidence_dir: opt.EvidenceDir = None,
) -> None:
    """Say whether the policies would admit a flow nobody captured, and why not.

    The same answer as cpg why, for a flow described by hand (what cilium policy trace used
    to do), with Cilium's semantics: the policy's namespace added to peer selectors, the
    local cluster by default, entities, CIDR rules for IPs, allow-localhost. The source's
    egress and the destination's ingress are judged, each where a pod is policed, and the
    node's (host) where host policies police it: with --host-firewall (the agents'
    enable-host-firewall), a clusterwide policy's nodeSelector selects the node; without it
    Cilium ignores host policies, and the answer says so.

    Exit codes: 0 admitted, 3 not admitted, 2 bad flags.
    """
    from cpg_core.why import traced_flows

    request = opt.check_request(options, ["-"], policies=policies)
    kubeconfig, context = options.kube_access()
    flows = opt.validated(
        lambda: traced_flows(
            source,
            destination,
            port,
            method=method,
            path=path,
            dns=dns,
            node_labels=node_label or (),
        )
    )
    try:
        answered = runs.trace_run(
            request,
            flows,
            kubeconfig=kubeconfig,
            context=context,
            evidence=opt.folder_evidence(policies, evidence_dir),
        )
    except CpgError as exc:
        fail(exc)
    _show(answered, output)
