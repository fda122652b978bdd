"""L7 details turned into rule parts: HTTP paths as anchored Cilium (RE2) regexes, methods,
DNS names, and the identifier segments ``--l7-collapse-paths`` folds into a wildcard."""

from __future__ import annotations

import re

_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_LONG_HEX = re.compile(r"^[0-9a-fA-F]{16,}$")
SEGMENT_WILDCARD = "[^/]+"


def url_path(url: str) -> str:
    """The path of a URL or request target, without query or fragment; ``/`` when empty.
    Nothing else is trimmed: the rule must admit exactly the path the flow carried (a path
    ending in a newline included), and the matcher reads paths through this same function."""
    text = url.split("#", 1)[0].split("?", 1)[0]
    if "://" in text:
        text = text.split("://", 1)[1]
        text = text[text.find("/") :] if "/" in text else ""
    elif text.startswith("//"):
        text = text[2:]
        text = text[text.find("/") :] if "/" in text else ""
    return text or "/"


def is_identifier(segment: str) -> bool:
    """A path segment that names one object (an id), not a resource: digits, a UUID, long hex."""
    return bool(segment) and (
        segment.isdigit() or bool(_UUID.fullmatch(segment)) or bool(_LONG_HEX.fullmatch(segment))
    )


def path_regex(url: str, collapse: bool = False) -> str:
    """``^…$`` matching exactly the URL's path (identifier segments as one-segment wildcards
    when ``collapse``)."""
    parts = []
    for segment in url_path(url).split("/"):
        if collapse and is_identifier(segment):
            parts.append(SEGMENT_WILDCARD)
        else:
            parts.append(_RE2_SPECIAL.sub(r"\\\1", segment))
    return "^" + "/".join(parts) + "$"


def http_method(method: str) -> str:
    return method.strip().upper()


_FQDN = re.compile(r"^([-a-zA-Z0-9_]+\.?)+$")


def valid_dns_name(name: str) -> bool:
    """Whether ``name`` (as :func:`dns_name` gives it) can be a ``matchName``: the CRD's
    characters and length."""
    return 0 < len(name) <= 253 and _FQDN.fullmatch(name) is not None


def dns_name(query: str) -> str:
    """A DNS query as a ``matchName``: trimmed, lower case, without the trailing dot."""
    name = query.strip()
    if name.endswith("."):
        name = name[:-1]
    return name.strip().lower()
