"""The CiliumNetworkPolicy CRD schema cpg ships (``schemas/``, see its PROVENANCE), as the
check ``cpg lint`` runs on every policy: what the API server would refuse, with the formats
it checks (``cidr``) and the fields it does not know (which Cilium's validator refuses: the
API server would prune them, leaving a rule other than the one written)."""

from __future__ import annotations

import functools
import ipaddress
import json
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

from cpg_core.lint import SchemaProblem

_UNCHECKED = frozenset({"metadata", "status"})
"""Top-level fields whose content the policy schema leaves to Kubernetes."""


@functools.cache
def _schema() -> dict[str, Any]:
    text = resources.files("cpg_io").joinpath("schemas/ciliumnetworkpolicy-v2.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _is_cidr(value: object) -> bool:
    """Kubernetes' ``format: cidr`` (Go's net.ParseCIDR): an address, a slash, a prefix
    length the family allows."""
    if not isinstance(value, str):
        return True  # the type check names it
    address, slash, bits = value.partition("/")
    if not slash or not bits.isdigit() or (len(bits) > 1 and bits.startswith("0")):
        return False
    try:
        ipaddress.ip_network(f"{address}/{bits}", strict=False)
    except ValueError:
        return False
    return "%" not in address


@functools.cache
def _validator() -> Any:
    import jsonschema  # type: ignore[import-untyped]

    formats = jsonschema.FormatChecker(formats=())
    formats.checks("cidr")(_is_cidr)
    return jsonschema.Draft7Validator(_schema(), format_checker=formats)


def crd_schema_errors(policy: Mapping[str, Any]) -> list[SchemaProblem]:
    """Each schema violation and unknown field of ``policy``, in document order."""
    found = [
        SchemaProblem(
            path=tuple(error.absolute_path),
            message=_short(error.message),
            validator=str(error.validator),
            value=error.instance if error.validator == "enum" else None,
        )
        for error in _validator().iter_errors(dict(policy))
    ]
    found += [
        SchemaProblem(path=path, message=f"unknown field {_dotted(path)}", unknown_field=True)
        for path in _unknown(policy, _schema(), ())
    ]
    return sorted(found, key=lambda p: [str(part) for part in p.path])


def _unknown(node: Any, schema: Mapping[str, Any], path: tuple[str | int, ...]) -> Iterator[Any]:
    """The paths of the keys the schema does not declare (where it declares its keys)."""
    if isinstance(node, Mapping):
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or "additionalProperties" in schema:
            return
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        for key, value in node.items():
            if not path and key in _UNCHECKED:
                continue
            if key not in properties:
                yield (*path, str(key))
            else:
                yield from _unknown(value, properties[key], (*path, str(key)))
    elif isinstance(node, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for n, item in enumerate(node):
                yield from _unknown(item, items, (*path, n))


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(message: str) -> str:
    """jsonschema quotes whole sub-documents in some messages: keep a line a person reads."""
    return message if len(message) <= 200 else message[:197] + "..."
