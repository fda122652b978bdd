"""Policy documents and their YAML text, rendered by hand so the bytes are ours to promise:
readable key order, quoted ports, a comment above every rule, a trailing newline."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from cpg_core.base._rules import (
    EGRESS,
    INGRESS,
    MAX_PORTS_PER_RULE,
    CidrPeer,
    EntityPeer,
    FqdnPeer,
    Rule,
    describe_rule,
    peer_selector,
    port_entries,
    rule_to_dict,
)

API_VERSION = "cilium.io/v2"
KIND = "CiliumNetworkPolicy"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "cpg"
SHARED_LABEL = "app.kubernetes.io/component"
SHARED_VALUE = "shared-rules"
"""The label that tells a shared policy from a workload's (plan suggests no fix into one)."""


def is_shared(policy: Mapping[str, Any]) -> bool:
    """A shared policy cpg wrote (§D43)."""
    metadata = policy.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return isinstance(labels, Mapping) and labels.get(SHARED_LABEL) == SHARED_VALUE


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
    return "".join(c if " " <= c < "\x7f" else _escape(c) for c in quoted)


def rule_comment(rule: Rule) -> str:
    """The comment above a rule: printable ASCII only, so no label or path can end the comment
    line (and write YAML of its own) or hide a character from the reviewer."""
    text = describe_rule(rule)
    if not (text.isascii() and text.isprintable()):
        text = "".join(c if " " <= c < "\x7f" else _escape(c) for c in text)
    return f"  # {text}"


def _escape(char: str) -> str:
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


def _emit_value(key_line: str, value: Any, indent: int, lines: list[str]) -> None:
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
        _emit_sequence(value, indent, lines)
    else:
        lines.append(f"{key_line} {yaml_scalar(value)}")


def _emit_mapping(
    value: Mapping[str, Any], indent: int, lines: list[str], first_prefix: str | None
) -> None:
    pad = " " * indent
    for i, (key, item) in enumerate(value.items()):
        lead = first_prefix if (i == 0 and first_prefix is not None) else pad
        _emit_value(f"{lead}{yaml_scalar(key)}:", item, indent, lines)


def _emit_sequence(items: Iterable[Any], indent: int, lines: list[str]) -> None:
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


def rule_lines(rule: Rule, policy_namespace: str) -> list[str]:
    """A rule as a sequence item under ``  ingress:``/``  egress:``, with its comment.

    Written out directly rather than through :func:`emit` because policies can hold
    thousands of rules; a test pins that both give the same text."""
    peer = rule.peer
    if rule.http or rule.dns or isinstance(peer, FqdnPeer):
        return rule_lines_generic(rule, policy_namespace)  # L7 rules: rare, keep one code path
    lines = [rule_comment(rule)]
    prefix = "from" if rule.direction == INGRESS else "to"
    if isinstance(peer, EntityPeer):
        lines += [f"  - {prefix}Entities:", f"    - {yaml_string(peer.entity)}"]
    elif isinstance(peer, CidrPeer):
        lines += [f"  - {prefix}CIDR:", *(f"    - {yaml_string(c)}" for c in rule.cidrs)]
    else:
        lines += [f"  - {prefix}Endpoints:", "    - matchLabels:"]
        lines += [
            f"        {yaml_string(k)}: {yaml_string(v)}"
            for k, v in peer_selector(peer, policy_namespace).items()
        ]
    if rule.ports:
        lines.append("    toPorts:")
        entries = port_entries(rule.ports)
        for start in range(0, len(entries), MAX_PORTS_PER_RULE):
            lines.append("    - ports:")
            for first, last, proto in entries[start : start + MAX_PORTS_PER_RULE]:
                lines.append(f'      - port: "{first}"')
                if last != first:
                    lines.append(f"        endPort: {last}")
                lines.append(f"        protocol: {proto}")
    if rule.icmps:
        lines.append("    icmps:")
        for start in range(0, len(rule.icmps), MAX_PORTS_PER_RULE):
            lines.append("    - fields:")
            for family, icmp_type in rule.icmps[start : start + MAX_PORTS_PER_RULE]:
                lines.append(f"      - family: {family}")
                lines.append(f"        type: {icmp_type}")
    return lines


def rule_lines_generic(rule: Rule, policy_namespace: str) -> list[str]:
    """:func:`rule_lines` through the generic emitter (the reference the fast path must match)."""
    lines = [rule_comment(rule)]
    _emit_sequence([rule_to_dict(rule, policy_namespace)], 2, lines)
    return lines


def metadata(name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}}


def endpoint_selector(selector: Iterable[tuple[str, str]]) -> dict[str, Any]:
    return {"matchLabels": dict(sorted(selector))}


def policy_document(
    name: str, namespace: str, selector: Iterable[tuple[str, str]], rules: Iterable[Rule]
) -> dict[str, Any]:
    """The policy as plain data (what ``yaml.safe_load`` of the rendered text gives)."""
    rules = list(rules)
    spec: dict[str, Any] = {"endpointSelector": endpoint_selector(selector)}
    for direction in (INGRESS, EGRESS):
        section = [rule_to_dict(r, namespace) for r in rules if r.direction == direction]
        if section:
            spec[direction] = section
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata(name, namespace),
        "spec": spec,
    }


def render_policy(
    name: str, namespace: str, selector: Iterable[tuple[str, str]], rules: Iterable[Rule]
) -> str:
    rules = list(rules)
    lines = [f"apiVersion: {API_VERSION}", f"kind: {KIND}"]
    _emit_value("metadata:", metadata(name, namespace), 0, lines)
    lines.append("spec:")
    _emit_value("  endpointSelector:", endpoint_selector(selector), 2, lines)
    for direction in (INGRESS, EGRESS):
        section = [r for r in rules if r.direction == direction]
        if section:
            lines.append(f"  {direction}:")
            for rule in section:
                lines.extend(rule_lines(rule, namespace))
    return "\n".join(lines) + "\n"
