"""Narrowing a policy's selector in its file, the first fix ``cpg plan`` proposes when a
policy would newly select a pod it was not made for (``version: canary`` beside the pods it
was): ``key NotIn (value)`` added to each endpointSelector that selects the pod, the rest of
the file kept byte for byte. Merging into a file narrowed so keeps the narrowing
(``_merge``): the selector is still cpg's, with pods left out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from cpg_core._base.errors import PolicyMergeError
from cpg_core._base.flow import Endpoint
from cpg_core._base.yaml_text import emit
from cpg_core._policy.matcher import endpoint_labels, policy_name, selector_matches
from cpg_core._policy.model import SUBJECT_FIELD, Spec, written_specs
from cpg_core._policy.write import (
    Exclusion,
    excluding,
    subject_of,
    with_exclusions as narrowed_again,
    with_subject,
    without_exclusions,
)
from cpg_core._policy.yamlread import BOUNDED_LOADER, YamlInputError, load_all


def narrow_in_text(
    text: str, path: str, policy: str, subject: Endpoint, key: str, value: str
) -> str | None:
    """``text`` with every spec of ``policy`` (``namespace/name``) that selects ``subject``
    no longer selecting pods with ``key=value``; None when no spec of it selects ``subject``
    (or the pods are left out already). PolicyMergeError when the file cannot be edited so
    that it reads back as exactly that change."""
    try:
        docs = load_all(text, path)
        nodes = list(yaml.compose_all(text, Loader=BOUNDED_LOADER))
    except (YamlInputError, yaml.YAMLError) as exc:
        raise PolicyMergeError(f"{path}: {exc}") from None
    labels = endpoint_labels(subject)
    edits: list[tuple[int, int, list[str]]] = []
    for doc, node in zip(docs, nodes, strict=True):
        if not isinstance(doc, Mapping) or policy_name(doc) != policy:
            continue
        for spec, spec_node in _spec_nodes(doc, node):
            selector = subject_of(spec.written)
            if not selector_matches(selector, labels, None, reserved=()):
                continue
            found = _value(spec_node, SUBJECT_FIELD)
            if found is None or not isinstance(found, yaml.MappingNode):
                raise PolicyMergeError(f"{path}: the endpointSelector of {policy} is not a block")
            edits.append(_edit(text, found, excluding(selector, key, value)))
    if not edits:
        return None
    lines = text.split("\n")
    for first, last, block in sorted(edits, reverse=True):
        lines[first:last] = block
    out = "\n".join(lines)
    _check_edit(text, out, path, policy, subject, key, value)
    return out


Exclusions = tuple[tuple[str, tuple[Exclusion, ...]], ...]
"""Per selector (its JSON without the exclusions), the exclusions a narrowing added."""


def _selector_key(selector: Mapping[str, Any]) -> str:
    return json.dumps(selector, sort_keys=True)


def split_exclusions(doc: Mapping[str, Any]) -> tuple[dict[str, Any], Exclusions]:
    """``doc`` with the exclusions a narrowing added to its specs' selectors taken out
    (cpg's own selectors hold ``In`` and ``Exists`` only), and those exclusions by the
    selector they narrow: a shared policy narrowed by ``plan --write-fixes`` is still cpg's,
    pods left out."""
    copied: dict[str, Any] = dict(doc)
    found: list[tuple[str, tuple[Exclusion, ...]]] = []
    single = isinstance(doc.get("spec"), Mapping)
    specs = [doc["spec"]] if single else list(doc.get("specs") or [])
    kept_specs = []
    for spec in specs:
        selector = subject_of(spec) if isinstance(spec, Mapping) else None
        if not isinstance(selector, Mapping):
            kept_specs.append(spec)
            continue
        plain, left_out = without_exclusions(selector)
        kept_specs.append(with_subject(spec, plain))
        if left_out:
            found.append((_selector_key(plain), tuple(left_out)))
    if single:
        copied["spec"] = kept_specs[0]
    else:
        copied["specs"] = kept_specs
    return copied, tuple(found)


def with_exclusions(text: str, path: str, exclusions: Exclusions) -> str:
    """``text`` (a policy cpg rendered) with each spec whose selector a narrowing left pods
    out of narrowed again the same way: what a rerun writes so the narrowing holds."""
    if not exclusions:
        return text
    wanted = dict(exclusions)
    docs = load_all(text, path)
    nodes = list(yaml.compose_all(text, Loader=BOUNDED_LOADER))
    edits = []
    for doc, node in zip(docs, nodes, strict=True):
        if not isinstance(doc, Mapping):
            continue
        for spec, spec_node in _spec_nodes(doc, node):
            found = _value(spec_node, SUBJECT_FIELD)
            selector = subject_of(spec.written)
            if found is None or not isinstance(selector, Mapping):
                continue
            left_out = wanted.get(_selector_key(selector))
            if not left_out:
                continue
            edits.append(_edit(text, found, narrowed_again(selector, left_out)))
    lines = text.split("\n")
    for first, last, block in sorted(edits, reverse=True):
        lines[first:last] = block
    return "\n".join(lines)


def _edit(text: str, node: yaml.Node, selector: Mapping[str, Any]) -> tuple[int, int, list[str]]:
    """(first line, line after the last, new lines) replacing a block mapping's lines: from
    its first key to the token that ends it (comments and blank lines before that token are
    not its own, and stay)."""
    lines = text.split("\n")
    start, end = node.start_mark, node.end_mark
    last = end.line if not lines[end.line][: end.column].strip() else end.line + 1
    while last > start.line + 1 and (
        not lines[last - 1].strip() or lines[last - 1].lstrip().startswith("#")
    ):
        last -= 1
    return start.line, last, emit(selector, start.column)


def _spec_nodes(doc: Mapping[str, Any], node: yaml.Node) -> list[tuple[Spec, yaml.Node]]:
    """Each spec of ``doc`` with the YAML node it is written in (found by its path)."""
    found = []
    for spec in written_specs(doc):
        spec_node: yaml.Node | None = node
        for step in spec.path:
            spec_node = _at(spec_node, step)
        if spec_node is not None:
            found.append((spec, spec_node))
    return found


def _at(node: yaml.Node | None, step: str | int) -> yaml.Node | None:
    if isinstance(step, int):
        items = node.value if isinstance(node, yaml.SequenceNode) else []
        return items[step] if step < len(items) else None
    return None if node is None else _value(node, step)


def _value(node: yaml.Node, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return value_node  # type: ignore[no-any-return]
    return None


def _check_edit(
    before: str, after: str, path: str, policy: str, subject: Endpoint, key: str, value: str
) -> None:
    """The edited text must read back as the old documents with only those selectors
    changed; anything else (a flow-style selector, a comment inside it) is refused."""
    labels = endpoint_labels(subject)
    expected = load_all(before, path)
    for doc in expected:
        if isinstance(doc, dict) and policy_name(doc) == policy:
            for spec in written_specs(doc):
                selector = subject_of(spec.written)
                if selector_matches(selector, labels, None, reserved=()):
                    assert isinstance(spec.written, dict)  # as load_all reads it
                    spec.written.update(with_subject(spec.written, excluding(selector, key, value)))
    try:
        got = load_all(after, path)
    except YamlInputError:
        got = None
    if got != expected:
        raise PolicyMergeError(
            f"{path}: could not narrow the endpointSelector of {policy} in place; add "
            f"{key} NotIn ({value}) to it by hand"
        )
