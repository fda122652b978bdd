"""Kubernetes-valid policy names and safe path components."""

from __future__ import annotations

import hashlib
import re

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_INVALID_RUN = re.compile(r"[^a-z0-9.-]+")
POLICY_NAME_PREFIX = "cpg-"
MAX_NAME = 63
SHARED_FOLDER = "_shared"
"""The folder of shared policies (§D43), beside the namespace folders: no namespace can be
called that (a DNS-1123 label starts with a letter or digit)."""


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and bool(_DNS1123_LABEL.fullmatch(value))


def short_hash(value: str, length: int = 6) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:length]


def policy_name(workload: str) -> str:
    """``cpg-<workload>`` as a valid DNS-1123 name (at most 63 characters, so it also fits
    label values). A workload that had to be changed to fit gets a short hash of its real name,
    so two workloads never share a name: ``MyApp`` → ``cpg-myapp-1a2b3c``, ``myapp`` → ``cpg-myapp``."""
    candidate = POLICY_NAME_PREFIX + workload
    if len(candidate) <= MAX_NAME and _DNS1123_SUBDOMAIN.fullmatch(candidate):
        return candidate
    cleaned = _INVALID_RUN.sub("-", workload.lower())
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip("-.")
    suffix = "-" + short_hash(workload)
    room = MAX_NAME - len(POLICY_NAME_PREFIX) - len(suffix)
    cleaned = cleaned[:room].rstrip("-.")
    name = POLICY_NAME_PREFIX + (cleaned + suffix if cleaned else suffix[1:])
    return name


def path_component_problem(value: str) -> str | None:
    """Why ``value`` must not become one path component, or None when it is safe."""
    if not value:
        return "is empty"
    if value in (".", ".."):
        return "is a directory-traversal segment"
    if "/" in value or "\\" in value:
        return "contains a path separator"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "contains a control character"
    if len(value.encode("utf-8")) > 200:
        return "is longer than 200 bytes"
    if value.startswith("."):
        return "starts with a dot"
    return None
