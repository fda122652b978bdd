"""Text from a capture is shown to people and models only after this: no terminal escape
sequence (nor what is left of one), control character, invisible format character (zero-width
space, bidi marks, the tag block that hides prompt injections), private-use or surrogate code
point survives. A label or an HTTP path cannot clear a terminal or whisper to a model."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, clear screen
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[@-Z\\-_]"  # any other two-byte escape
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})


def _keep(char: str, keep_newlines: bool) -> bool:
    if char == "\n" or char == "\t":
        return keep_newlines
    return unicodedata.category(char) not in _DROPPED_CATEGORIES


_UNDECODED = re.compile("[\udc80-\udcff]")
"""What Python makes of a byte of a file name that is not UTF-8 (``surrogateescape``)."""


def shown_path(name: str) -> str:
    """A file name as valid UTF-8 text: each byte that is not UTF-8 as ``\\xNN`` (dropped, two
    names could read the same; written raw, the output is not UTF-8 and a JSON reader fails)."""
    return _UNDECODED.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", name)


def json_text(text: str) -> str:
    """A JSON document's text whose strings hold a file name's undecodable bytes, each as
    the escape ``\\udcNN`` JSON reads back as the same name: the text is valid UTF-8."""
    return _UNDECODED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def path_uri(name: str) -> str:
    """A relative file name as a URI reference (SARIF's ``uri``): its bytes percent-encoded,
    slashes kept."""
    return "".join(
        chr(byte) if byte in _URI_KEPT else f"%{byte:02X}"
        for byte in name.encode("utf-8", "surrogateescape")
    )


_URI_KEPT = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")
"""RFC 3986's unreserved characters, and the path's slashes."""


def clean_text(text: str, keep_newlines: bool = False) -> str:
    """``text`` without escape sequences and invisible or control characters; newlines and
    tabs become spaces unless ``keep_newlines``; a byte of a file name that is not UTF-8 as
    ``\\xNN``."""
    if text.isprintable():
        return text
    text = _ESCAPES.sub("", shown_path(text))
    if not keep_newlines:
        text = text.replace("\n", " ").replace("\t", " ")
    return "".join(c for c in text if c == " " or _keep(c, keep_newlines))


def one_line_each(lines: list[str]) -> str:
    """Lines joined for a terminal, each kept on its own line: a newline inside a value (a
    label, a pod name, a path from a capture) becomes a space, so it cannot forge a line of
    output ("9/9 candidate flows admitted")."""
    return "\n".join(clean_text(line) for line in lines)


MAX_SHOWN = 200


def shown(value: object) -> str:
    """``repr(value)`` for an error message, cut to MAX_SHOWN characters: a 50 MB argument
    is never echoed whole into a reply or a log."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + f"… ({len(text)} chars)"


def clean(value: Any, keep_newlines: bool = False) -> Any:
    """A copy of a JSON-like value with every string (keys too) cleaned."""
    if isinstance(value, str):
        return clean_text(value, keep_newlines)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean(v, keep_newlines) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v, keep_newlines) for v in value]
    return value


__all__ = [
    "MAX_SHOWN",
    "clean",
    "clean_text",
    "json_text",
    "one_line_each",
    "path_uri",
    "shown",
    "shown_path",
]
