"""What an input that held no Hubble record looks like, so the error can say what the user
gave cpg by mistake and what to give it instead."""

from __future__ import annotations

import re

import orjson

CAPTURE_HINT = (
    "give cpg a capture from 'hubble observe -o jsonpb', or the Hubble exporter's files "
    "(/var/run/cilium/hubble/events.log by default)"
)

_COMPACT = re.compile(
    rb"^(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?|\d{4}-\d\d-\d\dT\S+):? .*(?:->|<-|<>) "
)
_TABLE_HEADER = re.compile(rb"^\s*TIMESTAMP\s+SOURCE\s+DESTINATION\s+TYPE\s+VERDICT", re.M)
_DICT = re.compile(rb"^\s*TIMESTAMP: .*\n\s*SOURCE: ", re.M)
_YAML = re.compile(rb"^(?:---\s*$|apiVersion:\s|kind:\s|metadata:\s*$|spec:\s*$)", re.M)


def describe_unreadable(head: bytes) -> str:
    """A few words on what ``head`` (the first kilobytes of an input without a single Hubble
    record) is, e.g. "Kubernetes YAML"."""
    if b"\x00" in head or _mostly_binary(head):
        return "binary data"
    if _TABLE_HEADER.search(head):
        return "Hubble table text (hubble observe -o table)"
    if _DICT.search(head):
        return "Hubble dict text (hubble observe -o dict)"
    lines = [line for line in head.splitlines() if line.strip()]
    if lines and _COMPACT.match(lines[0]):
        return "Hubble compact text (hubble observe -o compact)"
    if _YAML.search(head):
        return "Kubernetes YAML (a policy or manifest, not flows)"
    if lines:
        try:
            value = orjson.loads(lines[0])
        except orjson.JSONDecodeError:
            if lines[0].lstrip().startswith((b"{", b"[")):
                return "JSON that does not parse (a pretty-printed or cut-off document?)"
            return "text that is not JSON"
        if isinstance(value, dict):
            keys = ", ".join(sorted(str(k) for k in value)[:6]) or "none"
            return f"JSON that is not a Hubble flow record (its keys: {keys})"
        return f"JSON that is not a Hubble flow record (a {type(value).__name__}, not an object)"
    return "nothing but blank lines"


def _mostly_binary(head: bytes) -> bool:
    if not head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sample
            return True
        text = head[: exc.start].decode("utf-8")
    control = sum(1 for ch in text if ord(ch) < 32 and ch not in "\t\r\n\f")
    return control > len(text) // 10
