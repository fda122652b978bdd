"""A port string as Cilium reads it. Cilium parses ``port`` with Go's ``ParseUint(text, 0,
16)``: the base comes from the prefix, so ``"0100"`` is octal 64, ``"0x50"`` is 80 and
``"8_080"`` is 8080, all accepted by the CRD. What a reader sees and what Cilium enforces
differ there, so the matcher judges by this reading and lint says when it surprises."""

from __future__ import annotations

import functools
import re

GO_UINT = re.compile(
    r"0[xX]_?[0-9a-fA-F]+(?:_[0-9a-fA-F]+)*"
    r"|0[oO]_?[0-7]+(?:_[0-7]+)*"
    r"|0[bB]_?[01]+(?:_[01]+)*"
    r"|0(?:_?[0-7])+"
    r"|[1-9](?:_?[0-9])*"
    r"|0"
)
"""An unsigned integer literal as Go's ParseUint with base 0 accepts it: a base prefix (or a
leading 0 for octal), underscores only between digits or after the prefix, no sign."""


@functools.lru_cache(maxsize=4096)
def cilium_port(text: str) -> int | None:
    """The port number Cilium reads from ``text``, or None when it is not a number it parses
    (out of 0-65535, not a literal: then it may be a named port)."""
    if len(text) > 64 or GO_UINT.fullmatch(text) is None:
        return None
    digits = text.replace("_", "")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        value = int(digits[1:], 8)
    else:
        value = int(digits, 0)
    return value if value <= 65535 else None


def read_differently(text: str) -> bool:
    """Whether Cilium reads ``text`` as another number than a person would (a leading zero,
    a base prefix, underscores): ``"0100"`` looks like 100 and is 64."""
    number = cilium_port(text)
    return number is not None and text != str(number)
