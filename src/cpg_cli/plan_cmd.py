"""``cpg plan``: what applying the policies would change, before anyone applies them."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, say
from cpg_core import CaptureRequest, CpgError, Plan, to_data
from cpg_io.evidence_store import EvidenceStore, default_evidence_root
from cpg_io.policy_files import load_policies
from cpg_io.runs import plan_capture

MAX_SHOWN = 20


def print_plan(plan: Plan, *, proposal: str, origin: str, policies: int) -> None:
    breaking = plan.would_break_flows
    say(f"Plan for {policies} proposed policies in {proposal}")
    say(f"Current policies: {origin}")
    say(f"  (sees {plan.blind_spots})")
    say("")
    if plan.would_break:
        say(
            f"WOULD BREAK: {len(plan.would_break)} kinds of traffic, {breaking} flows that work "
            "today would be dropped:"
        )
        for item in plan.would_break[:MAX_SHOWN]:
            t = item.traffic
            say(
                f"  {t.direction:<7} {t.source} → {t.destination} {t.protocol}/{t.port} "
                f"({t.flows} flow{'s' if t.flows != 1 else ''})"
            )
            say(f"    why:      {item.why}")
            if item.selector:
                selector = ", ".join(f"{k}={v}" for k, v in item.selector.items())
                say(f"    selector: {item.policy} selects {selector}")
            say(f"    sample:   {t.sample}")
            say(f"    fix:      {item.fix}")
        if len(plan.would_break) > MAX_SHOWN:
            say(f"  … and {len(plan.would_break) - MAX_SHOWN} more (-o json lists all)")
    else:
        say(f"Nothing would break: {plan.forwarded_flows} forwarded flows checked.")
    if plan.newly_enforced:
        say("")
        say("Newly enforced endpoints (default-deny for the first time):")
        for n in plan.newly_enforced[:MAX_SHOWN]:
            labels = ", ".join(f"{k}={v}" for k, v in n.labels.items())
            pods = (
                f"; pods {', '.join(n.pods[:3])}{' …' if len(n.pods) > 3 else ''}" if n.pods else ""
            )
            say(
                f"  {n.namespace}/{n.workload} {n.direction} ({labels}{pods}): "
                f"{n.forwarded_flows} forwarded flows, by {', '.join(n.policies)}"
            )
    say("")
    say(f"Fixes: {plan.fixed}/{plan.candidates} denied flows admitted")
    for t in plan.not_fixed[:MAX_SHOWN]:
        say(f"  not admitted: {t.sample} ({t.flows} flows)")
    changed = [d for d in plan.diffs if d.status != "unchanged"]
    if changed:
        say("")
        say("Changes, in Cilium terms:")
        for diff in changed:
            say(f"  {diff.policy} ({diff.status})")
            for entry in diff.added[:MAX_SHOWN]:
                say(f"    + {entry}")
            for entry in diff.removed[:MAX_SHOWN]:
                say(f"    - {entry}")
    if plan.confidence:
        say("")
        say("Confidence of the new and changed rules (from the evidence):")
        for c in plan.confidence[: MAX_SHOWN * 2]:
            say(
                f"  {c.policy} {c.rule}: {c.flows} flows, {c.sources} source and "
                f"{c.destinations} destination pods in samples, {c.sessions} session(s), "
                f"{c.first_seen} → {c.last_seen}"
            )
    busy = sorted(
        (p for p in plan.policies if p.fixes or p.would_break or p.newly_enforced),
        key=lambda p: (-p.would_break, p.policy),
    )
    if busy:
        say("")
        say("Per policy:")
        for p in busy[:MAX_SHOWN]:
            say(
                f"  {p.policy}: fixes {p.fixes} flows, would break {p.would_break}, "
                f"newly enforces {p.newly_enforced} endpoint(s)"
            )
        if len(busy) > MAX_SHOWN:
            say(f"  … and {len(busy) - MAX_SHOWN} more (-o json)")
    say("")
    say(
        f"Would break {breaking} flows: review before applying."
        if plan.breaks
        else "Nothing that works today would break."
    )


def plan(
    inputs: Annotated[
        list[str],
        typer.Argument(
            metavar="CAPTURE...",
            help="A capture with every verdict (hubble observe without --verdict, or the "
            "exporter's files): files, folders or globs, as cpg replay reads them.",
            show_default=False,
        ),
    ],
    policies: Annotated[
        Path,
        typer.Option(
            "-d",
            "--output-dir",
            "--policies",
            metavar="DIR",
            envvar="CPG_OUTPUT_DIR",
            help="The proposed policies (the -d of cpg replay).",
        ),
    ] = Path("policies"),
    current: Annotated[
        Path | None,
        typer.Option(
            "--current",
            metavar="DIR|FILE",
            help="The policies applied today, as YAML ('kubectl get cnp,ccnp -A -o yaml', "
            "lists included).",
            show_default=False,
        ),
    ] = None,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="Read the policies applied today from the cluster (read-only: 'list' on "
            "ciliumnetworkpolicies and ciliumclusterwidenetworkpolicies).",
        ),
    ] = False,
    kubeconfig: opt.Kubeconfig = None,
    context: opt.Context = None,
    evidence_dir: opt.EvidenceDir = None,
    include_audit: Annotated[
        bool,
        typer.Option("--include-audit", help="AUDIT flows are candidates, as in replay."),
    ] = False,
    default_local_cluster: opt.DefaultLocalCluster = "true",
    output: opt.Output = "text",
) -> None:
    """Show what applying the policies would change: what they fix, what would break.

    An endpoint no policy selects allows everything; once a policy with ingress (egress)
    rules selects it, that direction is default-deny. cpg plan replays a capture with every
    verdict against the current and proposed policies and lists the traffic that works today
    and would be dropped (with a fix), the endpoints policed for the first time, the denied
    flows fixed, and each policy's changes in Cilium terms. Without --current or --cluster,
    what is policed today is inferred from the flows (*_allowed_by, policy drops).

    Exit codes: 0 nothing would break, 3 something would, 1 unreadable input, 2 bad flags.
    """
    if current is not None and cluster:
        raise typer.BadParameter("give --current or --cluster, not both", param_hint="--current")
    local_default = opt.parse_local_default(default_local_cluster)
    try:
        proposal = load_policies(policies)
        documents: list[dict[str, Any]] | None = None
        if current is not None:
            documents = load_policies(current)
            origin, source = f"--current {current} ({len(documents)})", "current"
        elif cluster:
            from cpg_io.kube import api_client, forget_temp_dir, list_cilium_policies

            kube_tmp = Path(tempfile.mkdtemp(prefix="cpg-kube-"))
            try:
                documents = list_cilium_policies(api_client(kubeconfig, context, temp_dir=kube_tmp))
            finally:
                forget_temp_dir(kube_tmp)
            origin, source = f"the cluster ({len(documents)})", "cluster"
        else:
            origin, source = "inferred from the flows (no --current or --cluster)", "flows"
        store = EvidenceStore(evidence_dir or default_evidence_root(policies), policies)
        planned = plan_capture(
            inputs,
            proposal,
            documents,
            current_source=source,  # type: ignore[arg-type]
            options=CaptureRequest.build(include_audit=include_audit).decide_options(),
            evidence=store,
            default_local_cluster=local_default,
        )
    except CpgError as exc:
        fail(exc)
    for problem in planned.problems:
        say(f"cpg: warning: {problem}", err=True)
    result = planned.plan
    if output == "json":
        typer.echo(json.dumps(to_data(result), indent=2, ensure_ascii=False))
    else:
        print_plan(result, proposal=str(policies), origin=origin, policies=len(proposal))
    if result.breaks:
        raise typer.Exit(3)
