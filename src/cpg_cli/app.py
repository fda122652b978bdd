"""The ``cpg`` command: flags in, cpg_core + cpg_io wired together, results out.

Results go to stdout, logs and warnings to stderr. Exit codes: 0 success, 1 runtime
failure, 2 usage error.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.bootstrap_cmd import bootstrap
from cpg_cli.drift_cmd import drift
from cpg_cli.explain_cmd import explain
from cpg_cli.generate_cmd import generate
from cpg_cli.lint_cmd import lint
from cpg_cli.plan_cmd import plan
from cpg_cli.propose_cmd import propose
from cpg_cli.replay_cmd import replay
from cpg_cli.report_cmd import report
from cpg_cli.shadow_cmd import shadow
from cpg_cli.verify_cmd import verify
from cpg_cli.why_cmd import trace, why
from cpg_io.version import cpg_version

app = typer.Typer(
    name="cpg",
    help=(
        "Generate least-privilege CiliumNetworkPolicies from Hubble flow denials.\n\n"
        "cpg reads dropped flows, keeps only those a missing allow rule explains, and writes "
        "one reviewable policy per workload under OUTPUT-DIR/<namespace>/<workload>.yaml, "
        "with the evidence behind every rule. It never writes to a cluster: review the YAML, "
        "then apply it yourself."
    ),
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"cpg {cpg_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version and exit.",
            callback=_version_callback,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Generate least-privilege CiliumNetworkPolicies from Hubble flow denials."""


@app.command(cls=opt.StrictCommand)
def version(
    output: Annotated[str, opt.output_option("text", "json", help="text or json.")] = "text",
) -> None:
    """Print the versions of cpg and of the libraries it talks to Hubble and MCP with."""
    import platform
    from importlib import metadata

    versions = {"cpg": cpg_version(), "python": platform.python_version()}
    for package in ("grpcio", "protobuf", "mcp", "kubernetes"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    if output == "json":
        typer.echo(json.dumps(versions, indent=2))
    else:
        for name, number in versions.items():
            typer.echo(f"{name:<11} {number}")


SHELLS = ("bash", "zsh", "fish", "powershell")


@app.command(cls=opt.StrictCommand)
def completion(
    shell: Annotated[
        str,
        typer.Argument(metavar="SHELL", help="bash, zsh, fish or powershell.", show_default=False),
    ],
) -> None:
    """Print the shell completion script (commands, flags, and NAMESPACE/WORKLOAD for
    cpg explain from the policy folder).

    \b
    bash:  source <(cpg completion bash)          # add to ~/.bashrc
    zsh:   cpg completion zsh > "${fpath[1]}/_cpg"  # then start a new shell
    fish:  cpg completion fish > ~/.config/fish/completions/cpg.fish
    """
    if shell not in SHELLS:
        raise typer.BadParameter(f"{shell!r} is not one of {', '.join(SHELLS)}", param_hint="SHELL")
    # Typer's own script: its completion protocol is what `cpg` answers to.
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name="cpg", complete_var="_CPG_COMPLETE", shell=shell))


app.command(cls=opt.StrictCommand)(generate)
app.command(cls=opt.StrictCommand)(bootstrap)  # without -n: "Missing option '-n'"
app.command(cls=opt.StrictCommand, no_args_is_help=True)(replay)
app.command(cls=opt.StrictCommand, no_args_is_help=True)(explain)
app.command(cls=opt.StrictCommand, no_args_is_help=True)(verify)
app.command(cls=opt.StrictCommand, no_args_is_help=True)(plan)
app.command(cls=opt.StrictCommand)(report)
app.command(cls=opt.StrictCommand)(shadow)
app.command(cls=opt.StrictCommand)(drift)
app.command(cls=opt.StrictCommand, no_args_is_help=True)(lint)
app.command(cls=opt.StrictCommand, no_args_is_help=True)(propose)
app.command(cls=opt.StrictCommand, no_args_is_help=True)(why)
app.command(cls=opt.StrictCommand, no_args_is_help=True)(trace)


@app.command(
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    },
    add_help_option=False,
)
def mcp(ctx: typer.Context) -> None:
    """Serve the read-only MCP stdio server (the same as cpg-mcp; see cpg-mcp --help)."""
    import os
    import sys

    # cpg_cli never imports cpg_mcp: the server runs as its own program in this process.
    os.execv(sys.executable, [sys.executable, "-m", "cpg_mcp", *ctx.args])


def main() -> None:
    app()
