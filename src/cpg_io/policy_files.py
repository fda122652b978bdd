"""Reading folders of Cilium policy YAML (what cpg wrote, a pull request, ``kubectl get -o
yaml`` output): every CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy, lists included."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import attrs

from cpg_core import Setting
from cpg_core.cilium import YamlInputError, load_all
from cpg_io.errors import Cancelled, PolicyLoadError
from cpg_io.store import RefusedFile, read_bounded

_KINDS = frozenset({"CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"})
MAX_FILE_BYTES = 16 * 1024 * 1024
"""A policy file larger than this is refused (a folder from a pull request is untrusted)."""


class _Shape(ValueError):
    """A document that is not shaped as a Cilium policy (or a list of them) should be."""


def _policies_in(doc: object, where: str = "") -> list[dict[str, Any]]:
    """The Cilium policies of one YAML document: itself, or the items of a ``kind: List``
    (as ``kubectl get cnp,ccnp -A -o yaml`` writes). _Shape names a field of the wrong type."""
    if not isinstance(doc, dict):
        return []
    kind = doc.get("kind")
    if kind is None:
        return []
    if not isinstance(kind, str):
        raise _Shape(f"{where}kind: expected a string, got {type(kind).__name__}")
    if kind in _KINDS:
        _check_policy(doc, where)
        return [doc]
    if kind.endswith("List"):
        items = doc.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise _Shape(f"{where}items: expected a list, got {type(items).__name__}")
        return [
            policy
            for index, entry in enumerate(items)
            for policy in _policies_in(entry, f"{where}items[{index}].")
        ]
    return []


def _check_policy(doc: dict[str, Any], where: str) -> None:
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        raise _Shape(f"{where}metadata: expected a mapping, got {type(metadata).__name__}")
    for key in ("name", "namespace"):
        value = metadata.get(key)
        if value is not None and not isinstance(value, str):
            raise _Shape(f"{where}metadata.{key}: expected a string, got {type(value).__name__}")
    if not isinstance(metadata.get("name"), str):
        raise _Shape(f"{where}metadata.name: missing")
    spec, specs = doc.get("spec"), doc.get("specs")
    if spec is not None:
        _check_spec(spec, f"{where}spec")
    if specs is not None:
        for index, item in enumerate(_list_of(specs, f"{where}specs")):
            _check_spec(item, f"{where}specs[{index}]")


_RULE_LISTS = ("ingress", "egress", "ingressDeny", "egressDeny")
_SELECTOR_LISTS = ("fromEndpoints", "toEndpoints", "fromRequires", "toRequires")
_STRING_LISTS = ("fromEntities", "toEntities", "fromCIDR", "toCIDR")
_MAPPING_LISTS = ("fromCIDRSet", "toCIDRSet", "toFQDNs", "toServices", "icmps", "toGroups")


def _mapping(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Shape(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _list_of(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Shape(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _check_selector(value: object, where: str) -> None:
    selector = _mapping(value, where)
    labels = selector.get("matchLabels")
    if labels is not None:
        for key, item in _mapping(labels, f"{where}.matchLabels").items():
            if not isinstance(key, str) or not isinstance(item, str | int | float | bool):
                raise _Shape(f"{where}.matchLabels.{key}: expected a string")
    expressions = selector.get("matchExpressions")
    if expressions is not None:
        for index, item in enumerate(_list_of(expressions, f"{where}.matchExpressions")):
            _mapping(item, f"{where}.matchExpressions[{index}]")


def _check_spec(value: object, where: str) -> None:
    """The parts of a policy spec cpg reads have the types Cilium's CRD gives them."""
    spec = _mapping(value, where)
    for key in ("endpointSelector", "nodeSelector"):
        if spec.get(key) is not None:
            _check_selector(spec[key], f"{where}.{key}")
    for direction in _RULE_LISTS:
        if spec.get(direction) is None:
            continue
        for index, rule in enumerate(_list_of(spec[direction], f"{where}.{direction}")):
            here = f"{where}.{direction}[{index}]"
            rule = _mapping(rule, here)
            for key in _SELECTOR_LISTS:
                if rule.get(key) is not None:
                    for n, item in enumerate(_list_of(rule[key], f"{here}.{key}")):
                        _check_selector(item, f"{here}.{key}[{n}]")
            for key in _STRING_LISTS:
                if rule.get(key) is not None and not all(
                    isinstance(item, str) for item in _list_of(rule[key], f"{here}.{key}")
                ):
                    raise _Shape(f"{here}.{key}: expected a list of strings")
            for key in _MAPPING_LISTS:
                if rule.get(key) is not None:
                    for n, item in enumerate(_list_of(rule[key], f"{here}.{key}")):
                        _mapping(item, f"{here}.{key}[{n}]")
            if rule.get("toPorts") is not None:
                for n, port_rule in enumerate(_list_of(rule["toPorts"], f"{here}.toPorts")):
                    port_rule = _mapping(port_rule, f"{here}.toPorts[{n}]")
                    if port_rule.get("ports") is not None:
                        for m, port in enumerate(
                            _list_of(port_rule["ports"], f"{here}.toPorts[{n}].ports")
                        ):
                            _mapping(port, f"{here}.toPorts[{n}].ports[{m}]")
                    if port_rule.get("rules") is not None:
                        _mapping(port_rule["rules"], f"{here}.toPorts[{n}].rules")


@attrs.frozen
class PolicyFolder:
    """What a folder of policy YAML holds: each usable file's text and policies, and a line
    for each file that could not be used (the others are still read)."""

    files: list[tuple[str, list[dict[str, Any]]]]
    problems: list[str]


def read_policy_folder(
    folder: Path, cancel: threading.Event | None = None, setting: str = "output_dir"
) -> PolicyFolder:
    """Each YAML file under ``folder`` (or that one file). Only regular files inside the
    folder are read, each up to MAX_FILE_BYTES: a symlink that leaves the folder, a device or
    a FIFO, an oversized file, bad YAML or a field of the wrong type is a problem naming the
    file, never a crash or an unbounded read."""
    if folder.is_file():
        root, paths = folder.parent, [folder]
    elif folder.is_dir():
        root, paths = folder, sorted([*folder.rglob("*.yaml"), *folder.rglob("*.yml")])
    else:
        if setting == "output_dir":
            raise PolicyLoadError(
                f"{folder}: not a folder of policies; give the ",
                Setting("output_dir"),
                " the policies were written to",
            )
        raise PolicyLoadError(
            f"{folder}: no such folder or file of policies; check ", Setting(setting)
        )
    files: list[tuple[str, list[dict[str, Any]]]] = []
    problems: list[str] = []
    inside = root.resolve()
    for path in paths:
        if cancel is not None and cancel.is_set():
            raise Cancelled("the reading was cancelled")
        try:
            text = read_bounded(path, MAX_FILE_BYTES, inside).decode("utf-8")
            docs = load_all(text, str(path))
            files.append((text, [p for doc in docs for p in _policies_in(doc)]))
        except RefusedFile as exc:
            problems.append(str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: cannot read it as YAML ({exc})")
        except YamlInputError as exc:
            problems.append(str(exc))
        except _Shape as exc:
            problems.append(f"{path}: not a usable Cilium policy: {exc}")
    return PolicyFolder(files, problems)


def load_policies(folder: Path, setting: str = "output_dir") -> list[dict[str, Any]]:
    """Every CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy in the YAML files under
    ``folder`` (or in that one file), lists included. PolicyLoadError lists every file that
    could not be used: a check on part of a folder would be a wrong answer."""
    return [policy for _text, found in load_policy_files(folder, setting) for policy in found]


def load_policy_files(
    folder: Path, setting: str = "output_dir"
) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each YAML file under ``folder``: its text and its Cilium policies; PolicyLoadError
    listing every file that could not be used."""
    read = read_policy_folder(folder, setting=setting)
    if read.problems:
        shown = "; ".join(read.problems[:5])
        more = f" (and {len(read.problems) - 5} more)" if len(read.problems) > 5 else ""
        raise PolicyLoadError(shown + more)
    return read.files
