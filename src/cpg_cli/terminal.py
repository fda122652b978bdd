"""What cpg prints for people goes through :func:`say`: text that came from a capture (labels,
pod and node names, HTTP paths) cannot move the cursor, clear or retitle the terminal, or hide
characters from the reviewer. Machine output (JSON, YAML) is left to its serializer."""

from __future__ import annotations

from typing import NoReturn

import typer

from cpg_cli.words import flag
from cpg_core import CpgError
from cpg_core.text import clean_text


def one_line(text: str) -> str:
    """A message on one line: a newline inside a file name or a label becomes a space, so it
    cannot start a line of its own (a forged result, or a CI log's ``::error`` command)."""
    return clean_text(text)


def say(text: str, *, err: bool = False, nl: bool = True) -> None:
    typer.echo(clean_text(text, keep_newlines=True), err=err, nl=nl)


def warn(problem: str) -> None:
    """A warning on stderr, a setting it names (a :class:`~cpg_core.Message`) as its flag."""
    from cpg_core import Message

    text = problem.render(flag) if isinstance(problem, Message) else problem
    say(one_line(f"cpg: warning: {text}"), err=True)


def fail(error: CpgError, context: str = "") -> NoReturn:
    """Print an error of the cpg family in the CLI's words and exit: 2 when the fix is on the
    command line (a missing extra), else 1."""
    say(one_line(f"cpg: error: {context}{error.render(flag)}"), err=True)
    raise typer.Exit(2 if getattr(error, "usage", False) else 1)
