"""The README and the manual (docs/) say only what is true: every flag they name exists in the
help of the command it is given to (code blocks), or of some cpg command (tables)."""

from __future__ import annotations

import re
import shlex

from conftest import ROOT, cpg

COMMANDS = (
    "replay",
    "generate",
    "explain",
    "verify",
    "bootstrap",
    "version",
    "completion",
    "plan",
    "report",
    "mcp",
    "why",
    "trace",
    "shadow",
    "drift",
    "lint",
    "propose",
)
_FLAG = re.compile(r"^-{1,2}[A-Za-z][-A-Za-z0-9]*")


def _help(command: str) -> str:
    if command == "mcp":
        return ""  # cpg mcp execs cpg-mcp: its flags are checked in test_mcp_stdio
    ran = cpg(command, "-h")
    assert ran.returncode == 0, command
    return ran.stdout


MANUAL = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
"""The README and every page of the manual (the generated reference too)."""


def _manual() -> str:
    return "\n".join(path.read_text() for path in MANUAL)


def _code_lines() -> list[str]:
    """The cpg command lines of the shell code blocks (``sh``, ``bash``, ``console`` or no
    language), block by block: a ``text`` block is output, not a command."""
    lines = []
    for path in MANUAL:
        language = None
        # a line ending in a backslash goes on on the next one
        text = re.sub(r"\\\n\s*", " ", path.read_text())
        for raw in text.splitlines():
            if raw.startswith("```"):
                language = raw[3:].strip() if language is None else None
                continue
            if language not in ("", "sh", "bash", "console"):
                continue
            line = raw.split("#", 1)[0].strip()
            if re.match(r"^(\S*/)?cpg ", line):
                lines.append(line)
    return lines


def test_flags_in_code_blocks_exist_for_their_command() -> None:
    lines = _code_lines()
    assert len(lines) >= 40, "the manual shows cpg commands"
    helps = {c: _help(c) for c in COMMANDS}
    missing = []
    for line in lines:
        words = shlex.split(line.split("|", 1)[0].split("||", 1)[0].split(">", 1)[0])
        command = words[1] if len(words) > 1 else ""
        if command not in helps:
            missing.append(f"{line}: no command {command!r}")
            continue
        if command == "mcp":
            continue
        for word in words[2:]:
            flag = _FLAG.match(word)
            if flag and flag.group(0) not in helps[command]:
                missing.append(f"{line}: {flag.group(0)} is not an option of cpg {command}")
    assert not missing, "\n".join(missing)


def test_flags_in_tables_exist() -> None:
    text = _manual()
    every = "\n".join(_help(c) for c in COMMANDS)
    missing = []
    for row in re.findall(r"^\|\s*`([^`]+)`", text, re.M):
        for part in re.split(r"[/ ,]", row):
            flag = _FLAG.match(part)
            if flag and flag.group(0) not in every:
                missing.append(f"{row}: {flag.group(0)}")
    assert not missing, "\n".join(missing)
