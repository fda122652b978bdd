"""``cpg report``: the output folder as a review document (Markdown for a pull request, one
self-contained HTML file with the namespace matrix and the traffic graph, or JSON)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, warn
from cpg_core import CpgError
from cpg_core.reports import REVIEW_MAX_SIZE, formats

FORMATS = formats("review")


_Output = Annotated[
    str,
    typer.Option(
        "-o",
        "--output",
        metavar="FORMAT",
        callback=opt.output_format(*FORMATS),
        help="markdown (also -o text: a pull-request body; GitHub draws its Mermaid graph), "
        "html (one self-contained file that works offline: a namespace matrix and the traffic "
        "graph), or json or yaml (the coverage and the namespace matrix, as data).",
    ),
]


_Plan = Annotated[
    Path | None,
    typer.Option(
        "--plan",
        metavar="FILE",
        help="The JSON of 'cpg plan -o json': adds what would break.",
        show_default=False,
    ),
]


_MaxSize = Annotated[
    int,
    typer.Option(
        "--max-size",
        metavar="CHARS",
        min=0,
        help="Markdown only: stop before this many characters, at a whole row or graph, and "
        "say what was left out (the most urgent comes first: would-break, newly enforced, "
        "findings). The default fits a GitHub pull-request comment (65,536); 0: no limit.",
    ),
]

_FullReport = Annotated[
    str,
    typer.Option(
        "--full-report",
        metavar="WHERE",
        help="Where the whole report is (an artifact's name, a URL), named in the note a cut "
        "Markdown report ends with. Default: the command that writes it.",
        show_default=False,
    ),
]


@opt.with_options("report")
def report(
    options: opt.Values,
    output_dir: opt.OutputDir = Path("policies"),
    output: _Output = "markdown",
    plan: _Plan = None,
    evidence_dir: opt.EvidenceDir = None,
    max_size: _MaxSize = REVIEW_MAX_SIZE,
    full_report: _FullReport = "",
) -> None:
    """Write a review report of the policies, their evidence and the cluster health to stdout.

    cpg report -d policies > report.md;  cpg report -d policies -o html > report.html

    Each says how much of the cluster the policies cover: of the workloads the policies,
    their evidence and the plan show, those some policy selects for ingress and for egress.
    """
    from cpg_core.reports import Review, render
    from cpg_io.declarations import read_declarations
    from cpg_io.evidence_store import EvidenceStore, default_evidence_root
    from cpg_io.runs import read_review

    try:
        store = EvidenceStore(evidence_dir or default_evidence_root(output_dir), output_dir)
        kubeconfig, context = options.kube_access()
        declared = read_declarations(
            options.check["declarations"], kubeconfig=kubeconfig, context=context
        )
        inputs = read_review(output_dir, store, plan, declarations=declared)
    except CpgError as exc:
        fail(exc)
    for problem in inputs.problems:
        warn(problem)
    if not full_report:
        full_report = f"cpg report -d {shlex.quote(str(output_dir))} --max-size 0"
        if plan is not None:
            full_report += f" --plan {shlex.quote(str(plan))}"
        if evidence_dir is not None:
            full_report += f" --evidence-dir {shlex.quote(str(evidence_dir))}"
    review = Review(
        title=str(output_dir), inputs=inputs, max_size=max_size, full_report=full_report
    )
    typer.echo(render(review, output), nl=False)
