"""``cpg plan``: what applying the policies would change, before anyone applies them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, say, warn
from cpg_core import CpgError
from cpg_core.why import FlowFilter
from cpg_io import runs

MAX_SHOWN = 20


_Inputs = Annotated[
    list[str],
    typer.Argument(
        metavar="CAPTURE...",
        help="A capture with every verdict (hubble observe without --verdict, or the "
        "exporter's files): files, folders or globs, as cpg replay reads them.",
        show_default=False,
    ),
]


_Policies = Annotated[
    Path,
    opt.policy_folder(
        "The proposed policies (the -d of cpg replay).",
    ),
]


_WriteFixes = Annotated[
    bool,
    typer.Option(
        "--write-fixes",
        help="Apply the first fix of each kind of traffic that would break to the proposed "
        "policies, then plan again: the narrower selector where the plan has one (the pod "
        "stays as it is today), else an allow rule (merged like replay; evidence marks it with "
        "class plan).",
    ),
]


@opt.with_flow_filters
@opt.with_options("plan")
def plan(
    inputs: _Inputs,
    options: opt.Values,
    policies: _Policies = Path("policies"),
    evidence_dir: opt.EvidenceDir = None,
    write_fixes: _WriteFixes = False,
    flow_filter: FlowFilter = opt.NO_FILTER,
    output: opt.Output = "text",
) -> None:
    """Show what applying the policies would change: what they fix, what would break.

    An endpoint no policy selects allows everything; once a policy with ingress (egress)
    rules selects it, that direction is default-deny. cpg plan replays a capture with every
    verdict against the current and proposed policies and lists the traffic that works today
    and would be dropped (with a fix), the endpoints policed for the first time, the denied
    flows fixed, and each policy's changes in Cilium terms. Without --current or --cluster,
    what is policed today is inferred from the flows (*_allowed_by, policy drops).

    Exit codes: 0 nothing would break, 3 something would break, 4 cannot judge (the capture has no
    forwarded traffic to check), 1 unreadable input, 2 bad flags.
    """
    from cpg_core import CANNOT_JUDGE
    from cpg_core.reports import render

    request = opt.check_request(options, inputs, policies=policies)
    kubeconfig, context = options.kube_access()

    def judged() -> runs.PlanRun:
        from cpg_cli.progress import ReviewProgress, on_terminal

        try:
            with ReviewProgress("planning", show=on_terminal(False)) as progress:
                return runs.plan_run(
                    request,
                    evidence_dir=evidence_dir,
                    kubeconfig=kubeconfig,
                    context=context,
                    flow_filter=flow_filter,
                    tally=progress.tally,
                )
        except CpgError as exc:
            fail(exc)

    planned = judged()
    if write_fixes and planned.view.plan.fixes:
        added = runs.write_fixes(planned, policies, evidence_dir=evidence_dir)
        for error in added.errors:
            say(f"cpg: error: {error}", err=True)
        if added.errors:
            raise typer.Exit(1)
        narrowed = f"narrowed {added.narrowed} selector(s) and " if added.narrowed else ""
        say(
            f"--write-fixes: {narrowed}added {added.rules} rule(s) for the traffic that would "
            f"break, in {len(added.files)} file(s) in {policies}; the plan with them:",
            err=True,
        )
        planned = judged()
    for problem in planned.problems:
        warn(problem)
    text = render(planned.view, output)
    if output in ("json", "yaml"):
        typer.echo(text)
    else:
        say(text)
    plan = planned.view.plan
    if plan.breaks or plan.overflows or plan.availability:
        if not write_fixes and any(item.rule_yaml for item in plan.would_break):
            say(
                "cpg: --write-fixes applies each first fix to the proposed policies (the "
                "narrower selector where there is one, else the rule)",
                err=True,
            )
        if plan.overflows:
            say(
                "cpg: a pod's policy map would overflow: its agent could not apply the "
                "policies (see POLICY MAP)",
                err=True,
            )
        if plan.availability:
            say(
                "cpg: the proposal would take away traffic the capture does not show (see "
                "AVAILABILITY)",
                err=True,
            )
        raise typer.Exit(3)
    if not plan.can_judge:
        say(f"cpg: {CANNOT_JUDGE}", err=True)
        raise typer.Exit(4)
