"""What cpg prints for people goes through :func:`say`: text that came from a capture (labels,
pod and node names, HTTP paths) cannot move the cursor, clear or retitle the terminal, or hide
characters from the reviewer. Machine output (JSON, YAML) is left to its serializer."""

from __future__ import annotations

import typer

from cpg_core.text import clean_text


def say(text: str, *, err: bool = False, nl: bool = True) -> None:
    typer.echo(clean_text(text, keep_newlines=True), err=err, nl=nl)
