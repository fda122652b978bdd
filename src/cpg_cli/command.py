"""What every command is built with, kept light (typer only) so that ``cpg version``, ``cpg
-h`` and shell completion do not load cpg's libraries: the command class and the ``-o``
option."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand

SECTION_ORDER = (
    "Input",
    "Output",
    "Cluster safety",
    "Readiness",
    "Evidence",
    "L7",
    "Time window",
    "Hubble Relay",
    "Cluster",
    "Cilium semantics",
    "Engine",
    "Logging",
    "Options",
)
"""The order of the sections of ``-h``; another section (the flow filters) goes before
Logging."""


class StrictCommand(TyperCommand):
    """A command that refuses an option given twice when it takes one value (click keeps the
    last one silently: ``bootstrap -n a -n b`` would print only b's policy), and whose help
    shows an argument by its placeholder alone (not ``FILE <list[str]>``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if getattr(param, "param_type_name", "") == "argument" and param.metavar:
                param.display_type_rich = lambda ctx: None  # type: ignore[attr-defined]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """Arguments, then the options in their sections (input, output, evidence, the time
        window…, as ``PANELS`` in cpg_cli.options groups them), then the rest."""
        arguments: list[tuple[str, str]] = []
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append(record)
            else:
                panel = getattr(param, "rich_help_panel", None) or "Options"
                sections.setdefault(panel, []).append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        order = {name: n for n, name in enumerate(SECTION_ORDER)}
        panels = sorted(sections, key=lambda panel: order.get(panel, len(order) - 2.5))
        for panel in panels:
            records = sections[panel]
            if records:
                with formatter.section(panel):
                    formatter.write_dl(records)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if ctx.resilient_parsing:
            return completion_words(self, ctx, args)
        single: dict[str, Any] = {}
        for param in self.get_params(ctx):
            if getattr(param, "param_type_name", "") == "option" and not (
                param.multiple or getattr(param, "is_flag", False) or getattr(param, "count", False)
            ):
                for name in [*param.opts, *param.secondary_opts]:
                    single[name] = param
        seen: dict[str, str] = {}
        for arg in args:
            if arg == "--":
                break
            if arg.startswith("--"):
                name = arg.split("=", 1)[0]
            elif arg.startswith("-") and len(arg) >= 2 and arg[1] != "-":
                name = arg[:2]
            else:
                continue
            option = single.get(name)
            if option is None:
                continue
            if option.name in seen:
                raise typer.BadParameter(
                    f"given twice ({seen[option.name]} and {name}); it takes one value",
                    ctx=ctx,
                    param_hint=name,
                )
            seen[option.name] = name
        result: list[str] = super().parse_args(ctx, args)
        return result


def completion_words(command: Any, ctx: Any, args: list[str]) -> list[str]:
    """Shell completion's parse of ``command``'s words, as typed. Completion needs only
    which option or argument is being completed (and, for a few, the folder given with -d),
    while typer would convert every value through a pydantic adapter built per parameter: a
    third of a second, on every TAB."""
    parser = command.make_parser(ctx)
    opts, rest, _ = parser.parse_args(args=args)
    for param in command.get_params(ctx):
        if param.name is not None:
            ctx.params[param.name] = opts.get(param.name)
    ctx.args = rest
    ctx._opt_prefixes.update(parser._opt_prefixes)
    return list(rest)


def _known_formats() -> frozenset[str]:
    """Every format some command prints (cpg_core.reports.FORMATS, and YAML documents): read
    only for a bad -o, so a command's start-up does not load the reports."""
    from cpg_core.reports import FORMATS

    return frozenset({"yaml", *(name for kind in FORMATS.values() for name in kind)})


def shared_formats(allowed: tuple[str, ...]) -> list[str]:
    """``allowed`` and the words every command takes: ``text`` (its format for people: a
    report's Markdown, bootstrap's YAML) and ``yaml`` (the JSON document as YAML)."""
    names = list(allowed)
    if "text" not in names:
        names.append("text")
    if "json" in names and "yaml" not in names:
        names.append("yaml")
    return names


def output_format(*allowed: str) -> Callable[[str], str]:
    """A ``-o/--output`` parser for a command that prints ``allowed`` formats (and the shared
    ``text``, ``json``, ``yaml``). ``text`` comes back as the command's format for people
    (the first of ``allowed``). A value that looks like a folder gets the hint kubectl and
    hubble users need: ``-o`` is a format."""
    names = shared_formats(allowed)

    def parse(value: str) -> str:
        text = str(value).strip().lower()
        if text == "text" and "text" not in allowed:
            return allowed[0]
        if text in names:
            return text
        hint = ""
        if "/" in text or "." in text or text not in _known_formats():
            hint = "; -o is the output format (as in kubectl and hubble): use -d DIR for a folder"
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(names)}{hint}")

    return parse


def output_option(*formats: str, help: str, rich_help_panel: str | None = None) -> Any:
    """The ``-o/--output FORMAT`` option of a command that prints ``formats``."""

    def complete(incomplete: str) -> list[str]:
        return [name for name in shared_formats(formats) if name.startswith(incomplete)]

    return typer.Option(
        "-o",
        "--output",
        metavar="FORMAT",
        callback=output_format(*formats),
        autocompletion=complete,
        help=help,
        rich_help_panel=rich_help_panel,
    )
