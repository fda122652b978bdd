"""YAML text written by hand, so the bytes are ours to promise: scalars plain only when every
YAML 1.1 and 1.2 reader reads them back as the same string, block style as kubectl writes it,
no character a reviewer cannot see."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
# Plain scalars some YAML reader takes for something else: YAML 1.2 numbers (0o17, 1_000,
# 0x1F, 1e3) and the YAML 1.1 booleans go-yaml v2 (kubectl) knows (y, n, on, off…).
_OTHER_READINGS = re.compile(
    r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|0o[0-7_]+|0x[0-9a-fA-F_]+"
    r"|0b[01_]+|\.[0-9]+)|(?i:y|n|yes|no|on|off|true|false|null)"
)
_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"


def _resolve(text: str) -> str:
    """The tag a YAML 1.1 loader gives ``text`` written plain."""
    tag: str = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    return tag


def yaml_scalar(value: object) -> str:
    """One scalar as YAML: plain when that reads back as the same string, else double-quoted."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    return yaml_string(str(value))


@functools.lru_cache(maxsize=65536)
def yaml_string(text: str) -> str:
    """A string as YAML: plain when every YAML 1.1 and 1.2 reader reads it back as the same
    string, else double-quoted with every non-ASCII or control character escaped (``\\uXXXX``,
    ``\\UXXXXXXXX`` beyond the BMP: never a surrogate pair, which libyaml rejects)."""
    if (
        _PLAIN.fullmatch(text)
        and not _OTHER_READINGS.fullmatch(text)
        and _resolve(text) == _STR_TAG
    ):
        return text
    quoted = json.dumps(text, ensure_ascii=False)  # escapes quotes, backslashes and C0
    if quoted.isascii() and "\x7f" not in quoted:
        return quoted
    return "".join(c if " " <= c < "\x7f" else escape_char(c) for c in quoted)


def escape_char(char: str) -> str:
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        return "\\ufffd"  # a lone surrogate is no character; YAML cannot hold it
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def emit(value: Any, indent: int = 0) -> list[str]:
    """Block-style YAML lines for a mapping (keys in insertion order), sequences not indented
    under their key, as kubectl writes them."""
    lines: list[str] = []
    _emit_mapping(value, indent, lines, first_prefix=None)
    return lines


def emit_value(key_line: str, value: Any, indent: int, lines: list[str]) -> None:
    if isinstance(value, Mapping):
        if not value:
            lines.append(key_line + " {}")
            return
        lines.append(key_line)
        _emit_mapping(value, indent + 2, lines, first_prefix=None)
    elif isinstance(value, list | tuple):
        if not value:
            lines.append(key_line + " []")
            return
        lines.append(key_line)
        emit_sequence(value, indent, lines)
    else:
        lines.append(f"{key_line} {yaml_scalar(value)}")


def _emit_mapping(
    value: Mapping[str, Any], indent: int, lines: list[str], first_prefix: str | None
) -> None:
    pad = " " * indent
    for i, (key, item) in enumerate(value.items()):
        lead = first_prefix if (i == 0 and first_prefix is not None) else pad
        emit_value(f"{lead}{yaml_scalar(key)}:", item, indent, lines)


def emit_sequence(items: Iterable[Any], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for item in items:
        if isinstance(item, Mapping) and item:
            _emit_mapping(item, indent + 2, lines, first_prefix=pad + "- ")
        elif isinstance(item, Mapping):
            lines.append(pad + "- {}")
        elif isinstance(item, list | tuple):
            raise ValueError("nested sequences are not used in policies")
        else:
            lines.append(f"{pad}- {yaml_scalar(item)}")
