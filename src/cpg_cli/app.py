"""The ``cpg`` command: flags in, cpg_core + cpg_io wired together, results out.

Results go to stdout, logs and warnings to stderr. Exit codes: 0 success, 1 runtime
failure, 2 usage error.

Each command lives in its own module, imported only when that command runs (or its help or
completion is asked for): ``cpg version``, ``cpg -h`` and TAB answer without loading cpg's
libraries.
"""

from __future__ import annotations

import difflib
import importlib
import json
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from cpg_cli.command import StrictCommand, completion_words, output_option


class LazyCommand:
    """Where a command lives and what ``cpg -h`` says of it before it is loaded."""

    __slots__ = ("function", "module", "no_args_is_help", "summary")

    def __init__(
        self, module: str, function: str, summary: str, *, no_args_is_help: bool = False
    ) -> None:
        self.module = module
        self.function = function
        self.summary = summary
        self.no_args_is_help = no_args_is_help


LAZY: dict[str, LazyCommand] = {
    "generate": LazyCommand(
        "cpg_cli.generate_cmd",
        "generate",
        "Watch Hubble Relay and write policies for denied flows as they arrive.",
    ),
    "bootstrap": LazyCommand(
        "cpg_cli.bootstrap_cmd",
        "bootstrap",
        "Print a default-deny CiliumNetworkPolicy for a namespace (Cilium 1.16 or newer).",
    ),
    "replay": LazyCommand(
        "cpg_cli.replay_cmd",
        "replay",
        "Generate policies from a captured Hubble flow file.",
        no_args_is_help=True,
    ),
    "explain": LazyCommand(
        "cpg_cli.explain_cmd",
        "explain",
        "Show the flows behind each rule of a generated policy.",
        no_args_is_help=True,
    ),
    "verify": LazyCommand(
        "cpg_cli.verify_cmd",
        "verify",
        "Check that policies admit every denied flow cpg can express, and no explicitly denied one.",
        no_args_is_help=True,
    ),
    "plan": LazyCommand(
        "cpg_cli.plan_cmd",
        "plan",
        "Show what applying the policies would change: what they fix, what would break.",
        no_args_is_help=True,
    ),
    "report": LazyCommand(
        "cpg_cli.report_cmd",
        "report",
        "Write a review report of the policies, their evidence and the cluster health to stdout.",
    ),
    "shadow": LazyCommand(
        "cpg_cli.shadow_cmd",
        "shadow",
        "Judge proposed policies on live traffic, before applying them (a staged policy).",
    ),
    "drift": LazyCommand(
        "cpg_cli.drift_cmd", "drift", "Show how the cluster drifted away from the policies applied."
    ),
    "lint": LazyCommand(
        "cpg_cli.lint_cmd",
        "lint",
        "Check Cilium policy and Kubernetes NetworkPolicy YAML, cpg's or anyone's.",
        no_args_is_help=True,
    ),
    "propose": LazyCommand(
        "cpg_cli.propose_cmd",
        "propose",
        "Propose a run's policies as a pull request: branch, commit, push, body.",
        no_args_is_help=True,
    ),
    "why": LazyCommand(
        "cpg_cli.why_cmd",
        "why",
        "Say why each kind of flow the filters select was denied, and what would admit it.",
        no_args_is_help=True,
    ),
    "trace": LazyCommand(
        "cpg_cli.why_cmd",
        "trace",
        "Say whether the policies would admit a flow nobody captured, and why not.",
        no_args_is_help=True,
    ),
}
"""The commands loaded on demand, in the order ``cpg -h`` lists them (after version and
completion, before mcp). A test checks each summary is the first line of the command's help."""


def load_command(name: str) -> Any:
    """The click command of a lazily loaded cpg command, built as ``app.command`` would."""
    lazy = LAZY[name]
    function = getattr(importlib.import_module(lazy.module), lazy.function)
    single = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False)
    single.command(name=name, cls=StrictCommand, no_args_is_help=lazy.no_args_is_help)(function)
    command = typer.main.get_command(single)
    command.name = name
    return command


class CommandGroup(TyperGroup):
    """cpg's commands, each module imported the first time its command is needed."""

    def list_commands(self, ctx: Any) -> list[str]:
        eager = super().list_commands(ctx)
        first = [name for name in ("version", "completion") if name in eager]
        rest = [name for name in eager if name not in first and name not in LAZY]
        return first + [name for name in LAZY if name not in first] + rest

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            result: list[str] = super().parse_args(ctx, args)
            return result
        rest = completion_words(self, ctx, args)  # TAB: the words alone (cpg_cli.command)
        ctx._protected_args, ctx.args = rest[:1], rest[1:]
        return list(ctx.args)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """A misspelt command gets the closest one named (``cpg repaly``: did you mean
        'replay'?), as kubectl and git do."""
        name = args[0] if args else ""
        unknown = (
            name
            and not name.startswith("-")
            and not ctx.resilient_parsing
            and self.get_command(ctx, name) is None
        )
        if unknown:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: Any, name: str) -> Any:
        found = super().get_command(ctx, name)
        if found is None and name in LAZY:
            found = load_command(name)
            self.add_command(found, name)
        return found

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        """TAB on a command name: the names and summaries from :data:`LAZY`, without
        importing any command (then the options, as every command completes them)."""
        from typer._click.core import Command  # Typer's own click, which it completes with
        from typer._click.shell_completion import CompletionItem

        results = []
        for name in self.list_commands(ctx):
            if not name.startswith(incomplete):
                continue
            if name in LAZY and name not in self.commands:
                results.append(CompletionItem(name, help=LAZY[name].summary))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                results.append(CompletionItem(name, help=command.get_short_help_str()))
        options: list[Any] = Command.shell_complete(self, ctx, incomplete)
        return results + options

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """As click lists commands, with a lazy command's summary from :data:`LAZY` (its
        module is not imported for ``cpg -h``)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in LAZY and name not in self.commands:
                rows.append((name, _short(LAZY[name].summary, limit)))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _short(summary: str, limit: int) -> str:
    """``summary`` cut at a word to ``limit`` characters with "...", as click cuts help."""
    if len(summary) <= limit:
        return summary
    return summary[: limit - 3].rsplit(" ", 1)[0] + "..."


app = typer.Typer(
    name="cpg",
    cls=CommandGroup,
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
        from cpg_io.version import cpg_version

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


@app.command(cls=StrictCommand)
def version(
    output: Annotated[str, output_option("text", "json", help="text, json or yaml.")] = "text",
) -> None:
    """Print the versions of cpg and of the libraries it talks to Hubble and MCP with."""
    import platform
    from importlib import metadata

    from cpg_io.version import cpg_version

    versions = {"cpg": cpg_version(), "python": platform.python_version()}
    for package in ("grpcio", "protobuf", "mcp", "kubernetes"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    if output == "json":
        typer.echo(json.dumps(versions, indent=2))
    elif output == "yaml":
        import yaml

        typer.echo(yaml.safe_dump(versions, sort_keys=False), nl=False)
    else:
        for name, number in versions.items():
            typer.echo(f"{name:<11} {number}")


SHELLS = ("bash", "zsh", "fish", "powershell")


@app.command(cls=StrictCommand)
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


def _option_named_files(argv: list[str]) -> list[str]:
    """Arguments before ``--`` that look like options and name files here: a file a pull
    request named ``--context=evil.yaml`` must never pass for an option (and go unlinted)."""
    import os

    found = []
    for arg in argv:
        if arg == "--":
            break
        if arg.startswith("-") and arg != "-" and os.path.lexists(arg):
            found.append(arg)
    return found


def main() -> None:
    import sys

    args = sys.argv[1:]
    if args[:1] != ["mcp"]:
        clash = _option_named_files(args)
        if clash:
            from cpg_cli.terminal import say

            say(
                f"cpg: error: {clash[0]!r} is an option's name and a file's: give paths after "
                "-- (cpg lint -- FILE...), so no file is read as an option",
                err=True,
            )
            raise SystemExit(2)
    app()
