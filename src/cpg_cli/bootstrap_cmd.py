"""``cpg bootstrap``: print a namespace's default-deny policy."""

from __future__ import annotations

from typing import Annotated

import typer

from cpg_core import render_bootstrap


def bootstrap(
    namespace: Annotated[
        str,
        typer.Option(
            "-n", "--namespace", help="The namespace to put under default deny.", show_default=False
        ),
    ],
) -> None:
    """Print a default-deny CiliumNetworkPolicy for a namespace (Cilium 1.16 or newer).

    Review it, apply it yourself (kubectl apply -f -), then capture the drops with cpg generate
    or replay and apply the policies they give. cpg never applies anything.
    """
    try:
        typer.echo(render_bootstrap(namespace), nl=False)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--namespace") from None
