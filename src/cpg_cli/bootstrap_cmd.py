"""``cpg bootstrap``: print a namespace's default-deny policy."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cpg_cli import options as opt


def bootstrap(
    namespace: Annotated[
        str,
        typer.Option(
            "-n",
            "--namespace",
            metavar="NS",
            help="The namespace to put under default deny.",
            show_default=False,
        ),
    ],
    output: Annotated[
        str,
        opt.output_option(
            "yaml",
            "json",
            help="yaml (also -o text; to pipe into kubectl apply -f -) or json.",
        ),
    ] = "yaml",
) -> None:
    """Print a default-deny CiliumNetworkPolicy for a namespace (Cilium 1.16 or newer).

    Review it, apply it yourself (kubectl apply -f -), then capture the drops with cpg generate
    or replay and apply the policies they give. cpg never applies anything.
    """
    from cpg_core import render_bootstrap

    try:
        text = render_bootstrap(namespace)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--namespace") from None
    if output == "json":
        import yaml

        text = json.dumps(yaml.safe_load(text), indent=2) + "\n"
    typer.echo(text, nl=False)
