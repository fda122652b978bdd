"""The one-pass YAML reader against PyYAML's safe loader: the same values for every
document either reads, the same refusals for what cpg bounds, and the line of each field."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from conftest import EXAMPLE, SHARED
from cpg_core._policy.yamlread import (
    MAX_DEPTH,
    YamlInputError,
    load_all,
    load_all_with_lines,
)

SAFE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=SAFE))


TRICKY = [
    "a: yes\nb: no\nc: on\nd: ~\ne: null\nf:\ng: True\n",
    "x: 0x1F\ny: 0o17\nz: 017\nw: 1_000\nv: 1:30\nu: -0b101\nt: +12\n",
    "f: .inf\ng: -.Inf\nh: 1.5e3\ni: 2001-12-14\nj: 2001-12-14t21:59:43.10-05:00\nk: 6.8523015e+5\n",
    "m:\n  <<: {a: 1, b: 2}\n  b: 3\n",
    "m:\n  <<: [{a: 1}, {a: 2, c: 3}]\n  <<: {c: 9, d: 4}\n",
    "'=': 1\n",
    "a: !!str 5\nb: !!int '7'\nc: !!float '1'\nd: ! 12\ne: !!bool 'yes'\nf: !!null ''\n",
    '- a\n- \'b\'\n- "c"\n- |\n  lit\n- >\n  fold\n  ed\n- "\\u00e9\\t"\n',
    "---\n---\na: 1\n...\n---\n- 1\n",
    "",
    "# only a comment\n",
    "just a scalar",
    "[1, [2, [3, {a: [4]}]]]",
    "1: one\n2.5: x\nnull: y\ntrue: z\n",
    "a: b\na: c\n",
    "x: !!map {a: 1}\ny: !!seq [1]\n",
    "s: 12345678901234567890\n",
    "spec:\n  endpointSelector:\n    matchLabels: {app: web, 'k8s:io.kubernetes.pod.namespace': x}\n",
    "ports:\n- port: '0100'\n  endPort: 0x10\n  protocol: TCP\n",
]


@pytest.mark.parametrize("text", TRICKY)
def test_the_same_values_as_the_safe_loader(text: str) -> None:
    assert repr(load_all(text, "f.yaml")) == repr(safe_load(text))


REFUSED = [
    ("{? [a]: 1}", "found unhashable key", 1),
    ("? - a\n: b\n", "found unhashable key", 2),
    ("k: 2001-13-45\n", "as timestamp", 1),
    ("a: <<\n", "could not determine a constructor", 1),
    ("x: !!map 5\n", "expected a map", 1),
    ("x: " + "9" * 40 + "\n", "a number of 40 digits", 1),
    ("a: &x 1\nb: *x\n", "anchors or aliases", 1),
    ("a: !!python/object:os.system ls\n", "is not plain YAML", 1),
    ("a: !foo bar\n", "'!foo' is not plain YAML", 1),
    ("a: [1, 2\n", "not valid YAML", 2),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH}", 1),
]


@pytest.mark.parametrize(("text", "words", "line"), REFUSED)
def test_what_cannot_be_built_or_is_bounded_is_one_error_with_its_line(
    text: str, words: str, line: int
) -> None:
    with pytest.raises(YamlInputError) as raised:
        load_all(text, "f.yaml")
    message = str(raised.value)
    assert message.startswith("f.yaml: ") and words in message, message
    assert raised.value.line == line


def test_a_limit_is_named_before_a_value_that_cannot_be_built() -> None:
    """Every limit is checked over the whole stream first, as the two-pass reader did: an
    alias after an unbuildable number is the error."""
    with pytest.raises(YamlInputError, match="anchors or aliases"):
        load_all("n: " + "9" * 40 + "\na: &x 1\n", "f.yaml")


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["yes", "No", "~", "0x1F", "017", "1:30", ".inf", "=", "<<", "2001-12-14"]),
    st.dates(min_value=datetime.date(1900, 1, 1)),
)
keys = st.one_of(st.text(max_size=8), st.integers(min_value=-5, max_value=5), st.booleans())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(
    documents=st.lists(values, min_size=1, max_size=3),
    flow=st.sampled_from([None, True, False]),
    style=st.sampled_from([None, "'", '"']),
)
def test_any_document_pyyaml_writes_reads_back_the_same(
    documents: list[Any], flow: bool | None, style: str | None
) -> None:
    text = yaml.safe_dump_all(
        documents, default_flow_style=flow, default_style=style, allow_unicode=True
    )
    assert repr(load_all(text, "f.yaml")) == repr(safe_load(text))


def _yaml_files() -> list[Path]:
    roots = [EXAMPLE.parent, SHARED / "semantics", SHARED / "semantics-2", SHARED / "schemas"]
    found = [p for root in roots if root.exists() for p in sorted(root.rglob("*.yaml"))]
    return found + sorted((Path(__file__).parents[2] / "deploy").rglob("*.yaml"))


def test_every_yaml_file_of_the_project_and_the_vectors_reads_the_same() -> None:
    files = _yaml_files()
    assert len(files) > 20
    for path in files:
        text = path.read_text()
        try:
            expected = safe_load(text)
        except yaml.YAMLError:
            with pytest.raises(YamlInputError):
                load_all(text, str(path))
            continue
        if "&" in text and "*" in text:
            continue  # anchors: refused by design
        assert repr(load_all(text, str(path))) == repr(expected), path


def test_each_field_has_the_line_of_its_value() -> None:
    text = (
        "apiVersion: cilium.io/v2\n"  # 1
        "spec:\n"  # 2
        "  endpointSelector:\n"  # 3
        "    matchLabels: {app: web}\n"  # 4
        "  ingress:\n"  # 5
        "  - fromEndpoints:\n"  # 6
        "    - {}\n"  # 7
        "    toPorts: [{ports: [{port: '80'}]}]\n"  # 8
        "---\n"
        "- one\n"  # 10
    )
    (first, lines), (second, more) = load_all_with_lines(text, "f.yaml")
    assert first["spec"]["ingress"][0]["toPorts"][0]["ports"][0]["port"] == "80"
    assert lines[()] == 1 and lines[("apiVersion",)] == 1
    assert lines[("spec",)] == 3  # a block mapping starts at its first key
    assert lines[("spec", "endpointSelector", "matchLabels", "app")] == 4
    assert lines[("spec", "ingress", 0)] == 6
    assert lines[("spec", "ingress", 0, "fromEndpoints", 0)] == 7
    assert lines[("spec", "ingress", 0, "toPorts", 0, "ports", 0, "port")] == 8
    assert second == ["one"] and more == {(): 10, (0,): 10}
