"""The import rules of ARCHITECTURE §L1 and §L2: a pure core with a small face, and two
composition roots that never meet."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

# What the core imports is held by the import contracts of pyproject.toml (the pure core,
# front ends -> io -> core, the front ends apart); what it calls is checked here.
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval", "breakpoint"}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}


def _calls(path: Path) -> set[str]:
    """Names called directly (``open(...)``) and methods called (``datetime.now()``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names.add(node.func.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            names.add("." + node.func.attr)
    return names


def test_core_calls_nothing_that_does_io() -> None:
    modules = sorted((SRC / "cpg_core").rglob("*.py"))
    assert modules, "cpg_core has no modules"
    for path in modules:
        calls = _calls(path) & (FORBIDDEN_CALLS | {"." + c for c in CLOCK_CALLS})
        assert not calls, f"{path.name} calls {sorted(calls)}: cpg_core must stay pure"


def test_the_check_itself_catches_a_forbidden_call(tmp_path: Path) -> None:
    sample = tmp_path / "bad.py"
    sample.write_text("open('x')\ndatetime.now()\nprint(1)\n")
    assert {"open", ".now", "print"} <= _calls(sample)


PUBLIC_CORE = frozenset(
    {
        "cpg_core",
        "cpg_core.cilium",
        "cpg_core.lazy",
        "cpg_core.declarations",
        "cpg_core.readiness",
        "cpg_core.identities",
        "cpg_core.lint",
        "cpg_core.model",
        "cpg_core.options",
        "cpg_core.reading",
        "cpg_core.reports",
        "cpg_core.shadow",
        "cpg_core.sharing",
        "cpg_core.text",
        "cpg_core.why",
    }
)
"""The face of cpg_core: the package itself and its few public modules. Everything else is a
private module (``_name``) that only cpg_core and its tests import."""


def _core_imports_outside_the_face(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        found += [m for m in modules if m.split(".")[0] == "cpg_core" and m not in PUBLIC_CORE]
    return found


def test_adapters_import_only_the_face_of_cpg_core() -> None:
    for package in ("cpg_io", "cpg_cli", "cpg_mcp"):
        for path in sorted((SRC / package).rglob("*.py")):
            if "_proto" in path.parts:
                continue
            private = _core_imports_outside_the_face(path)
            assert not private, f"{path} imports {private}: use the public face of cpg_core"


def test_the_face_check_catches_a_private_import(tmp_path: Path) -> None:
    sample = tmp_path / "adapter.py"
    sample.write_text(
        "from cpg_core import Flow\nfrom cpg_core.reports import markdown_report\n"
        "from cpg_core._synthesis.aggregate import hold_back\nimport cpg_core._synthesis.lines\n"
        "from cpg_core._reports.html import layout\n"
    )
    assert _core_imports_outside_the_face(sample) == [
        "cpg_core._synthesis.aggregate",
        "cpg_core._synthesis.lines",
        "cpg_core._reports.html",
    ]


def test_every_core_module_outside_the_face_is_private() -> None:
    for path in sorted((SRC / "cpg_core").rglob("*.py")):
        relative = path.relative_to(SRC).with_suffix("")
        parts = [p for p in relative.parts if p != "__init__"]
        name = ".".join(parts)
        assert name in PUBLIC_CORE or parts[1].startswith("_"), (
            f"{name}: a core module is either part of the face (PUBLIC_CORE) or lives in a "
            "layer's private package (cpg_core._layer)"
        )


CORE_LAYERS = ("_base", "_flows", "_policy", "_synthesis", "_review", "_requests", "_reports")
"""The core's layers as private packages, lowest first: a module imports only its own
layer's and the layers' below it (and the leaf helpers ``cpg_core.text`` and
``cpg_core.lazy``); the import-linter contracts in pyproject.toml hold the order."""
CORE_LEAVES = frozenset({"cpg_core.text", "cpg_core.lazy"})


def _core_layer(module: str) -> str | None:
    """The layer of a core module, or None for the face (the top-level public modules)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in CORE_LAYERS else None


def test_the_core_layers_keep_their_private_names_and_never_import_the_face() -> None:
    """No layer imports the face above them all (the package or its public modules), and
    no name or module starting with an underscore crosses into another layer (what another
    layer needs is a public name of a public module). The order of the layers is the
    import-linter contracts' (pyproject.toml)."""
    found: list[str] = []
    for path in sorted((SRC / "cpg_core").rglob("*.py")):
        relative = path.relative_to(SRC).with_suffix("")
        module = ".".join(p for p in relative.parts if p != "__init__")
        mine = _core_layer(module)
        if mine is None:
            continue  # the face may import from any layer
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
                "cpg_core"
            ):
                continue
            target = str(node.module)
            if target in CORE_LEAVES:
                continue
            theirs = _core_layer(target)
            if theirs is None:
                found.append(f"{module} imports the face {target}")
                continue
            private = [a.name for a in node.names if a.name.startswith("_")]
            if theirs != mine and private:
                found.append(f"{module} takes {private} from {target}, another layer")
            if theirs != mine and target.split(".")[-1].startswith("_"):
                found.append(f"{module} imports {target}, a private module of another layer")
    assert found == []


def test_a_layers_package_is_its_docstring_alone() -> None:
    """Cross-layer imports name the module: a layer's ``__init__`` re-exports nothing."""
    for layer in CORE_LAYERS:
        tree = ast.parse((SRC / "cpg_core" / layer / "__init__.py").read_text())
        assert len(tree.body) == 1 and ast.get_docstring(tree), layer


def test_the_core_has_no_module_outside_its_layers_and_face() -> None:
    """Every private core module lives in a layer package: nothing new lands at the top."""
    loose = sorted(p.name for p in (SRC / "cpg_core").glob("_*.py") if p.name != "__init__.py")
    assert loose == []
    folders = {p.name for p in (SRC / "cpg_core").iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(CORE_LAYERS)


def test_the_face_is_importable_and_small() -> None:
    import importlib

    for module_name in sorted(PUBLIC_CORE):
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        assert exported, f"{module_name} declares its public names in __all__"
        for name in exported:
            assert hasattr(module, name), f"{module_name}.{name}"
    import cpg_core

    assert len(cpg_core.__all__) < 80


LAZY_FACES = ("cpg_core", "cpg_core.reports", "cpg_core.why", "cpg_io.runs")
"""Packages whose names load on first use (``cpg_core.lazy``, §D31)."""


def _type_checking_imports(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        assert alias.asname == alias.name, f"{path}: {alias.name} as itself"
                        found[alias.name] = statement.module
    return found


def test_lazy_faces_list_each_name_once_and_load_it_on_first_use() -> None:
    import importlib
    import subprocess
    import sys

    for name in LAZY_FACES:
        module = importlib.import_module(name)
        path = Path(str(module.__file__))
        table = {name: where for where, names in module._WHERE.items() for name in names.split()}
        assert _type_checking_imports(path) == table, f"{path}: the table and the imports differ"
        assert sorted(module.__all__) == sorted(table), f"{path}: __all__ and the table differ"
        for exported in table:
            assert getattr(module, exported) is getattr(
                importlib.import_module(table[exported]), exported
            )
    probe = (
        "import sys, cpg_core, cpg_core.reports, cpg_io.runs\n"
        "from cpg_core import PROTOCOLS\n"
        "print(sorted(m for m in sys.modules if m.startswith(('cpg_core.', 'cpg_io.'))))\n"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert (
        ran.stdout.strip()
        == "['cpg_core._base', 'cpg_core._base.flow', 'cpg_core.lazy', 'cpg_core.reports', "
        "'cpg_io.runs']"
    ), ran


def test_the_format_names_are_the_formats_rendered() -> None:
    from cpg_core._reports.format_names import FORMAT_NAMES
    from cpg_core._reports.formats import FORMATS

    assert {kind: tuple(renderers) for kind, renderers in FORMATS.items()} == dict(FORMAT_NAMES)


ROOT = SRC.parent
_LABEL = re.compile(r"§([A-Z]\d+)")


def _cited_labels() -> dict[str, list[str]]:
    cited: dict[str, list[str]] = {}
    for folder in ("src", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for label in _LABEL.findall(path.read_text(encoding="utf-8")):
                cited.setdefault(label, []).append(str(path.relative_to(ROOT)))
    return cited


def test_every_section_the_code_cites_is_in_the_repository() -> None:
    document = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### §([A-Z]\d+) ", document, re.M))
    cited = _cited_labels()
    assert {"D1", "D13", "L1"} <= set(cited), "the code cites the architecture"
    missing = {label: files for label, files in cited.items() if label not in headings}
    assert not missing, f"cited but not in docs/ARCHITECTURE.md: {missing}"


def test_no_code_points_outside_the_repository_for_its_design() -> None:
    for folder in ("src", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            outside = ("DESIGN" + " §", "shared/" + "DESIGN")  # spelled apart: not a match here
            assert not any(mark in text for mark in outside), path


JUDGMENT = ("decide", "matcher", "plan", "why", "verify", "drift", "lint", "merge", "synthesis")
"""The core modules whose verdicts users act on: each has its unit tests in tests/core."""


def test_the_judgment_code_has_unit_tests_beside_it() -> None:
    core = Path(__file__).resolve().parent / "core"
    src = Path(__file__).resolve().parents[1] / "src" / "cpg_core"
    for name in JUDGMENT:
        assert list(src.glob(f"_*/{name}.py")) + list(src.glob(f"_*/_{name}.py")), name
        assert (core / f"test_{name}.py").is_file(), f"{name}.py has no tests/core/test_{name}.py"


_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]+)")
CLI_RENDERINGS = {
    "cpg_core/_requests/options.py": "the option table declares the flags",
    "cpg_core/_reports/run.py": "the terminal report of a cpg run: the next cpg commands to type",
}
"""Core and io modules whose texts are the command line's own, with the reason."""


def _cli_flags() -> set[str]:
    from cpg_cli.app import LAZY, load_command

    return {
        spelled
        for name in LAZY
        for param in load_command(name).params
        for spelled in (*param.opts, *param.secondary_opts)
        if spelled.startswith("--")
    }


def _texts(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a module that reach a user: not docstrings (of modules,
    classes, functions or attributes)."""
    documentation = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in documentation
    ]


def test_no_core_or_io_text_names_a_cli_flag() -> None:
    """What core and io say reaches cpg-mcp's agents too: a setting is a Setting part each
    root spells, or plain words, never a flag (another tool's flags, hubble's or kubectl's,
    and arguments passed to git are theirs)."""
    flags = _cli_flags()
    src = Path(__file__).resolve().parents[1] / "src"
    found = []
    for package in ("cpg_core", "cpg_io"):
        for path in sorted((src / package).rglob("*.py")):
            where = path.relative_to(src).as_posix()
            if where in CLI_RENDERINGS:
                continue
            for node in _texts(ast.parse(path.read_text(encoding="utf-8"))):
                text = str(node.value)
                for match in _FLAG.finditer(text):
                    before = text[: match.start()]
                    if match.group(1) not in flags or text.strip() == match.group(1):
                        continue
                    if "hubble " in before or "kubectl " in before:
                        continue
                    found.append(f"{where}:{node.lineno}: {match.group(1)} in {text!r}")
    assert not found, "\n".join(found)


def test_every_benchmark_imports_against_this_tree() -> None:
    """Benchmarks run rarely: a name they import that moved (the run layer's face) is caught
    here, not on the day someone measures."""
    import importlib.util

    benchmarks = Path(__file__).resolve().parents[1] / "benchmarks"
    for path in sorted(benchmarks.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"_benchmark_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert callable(getattr(module, "main", None)), f"{path.name} has no main()"


CNP_KEYS = frozenset(
    {
        "endpointSelector",
        "nodeSelector",
        "ingressDeny",
        "egressDeny",
        "enableDefaultDeny",
        "fromEndpoints",
        "toEndpoints",
        "fromEntities",
        "toEntities",
        "fromCIDR",
        "toCIDR",
        "fromCIDRSet",
        "toCIDRSet",
        "fromNodes",
        "toNodes",
        "fromGroups",
        "toGroups",
        "fromRequires",
        "toRequires",
        "toFQDNs",
        "toServices",
        "toPorts",
        "endPort",
        "icmps",
        "matchLabels",
        "matchExpressions",
        "matchName",
        "matchPattern",
        "serverNames",
        "cidrGroupRef",
        "originatingTLS",
        "terminatingTLS",
    }
)
"""The field names of the CiliumNetworkPolicy grammar that mean nothing else (``port``,
``rules`` or ``ingress`` are words flows and reports use too)."""
CNP_KEY_PARTS = frozenset({"Endpoints", "Entities", "CIDRSet", "Nodes", "Groups", "Requires"})
"""The halves a key is built from (``side + "Endpoints"``)."""
GRAMMAR_FOLDER = SRC / "cpg_core" / "_policy"


def _grammar_strings(tree: object) -> list[tuple[int, str]]:
    """The string constants of a module that spell a key of the grammar: the key itself, as
    a YAML key (``"    toPorts:"``, ``"- matchLabels:"``), or half of one; prose that
    names a field in a message is left alone."""
    import ast

    found = []
    for node in ast.walk(tree):  # type: ignore[arg-type]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            bare = node.value.lstrip().removeprefix("- ").removesuffix(":")
            if bare in CNP_KEYS or bare in CNP_KEY_PARTS:
                found.append((node.lineno, node.value))
    return found


def test_only_the_policy_folder_spells_the_cilium_policy_grammar() -> None:
    """Every key of the CiliumNetworkPolicy grammar is read and written in
    ``cpg_core/_policy`` (the model, the acceptance checks, the writer): a change in how
    Cilium reads a field is made in one folder, not found in a dozen modules."""
    import ast

    found = []
    for path in sorted(SRC.rglob("*.py")):
        if GRAMMAR_FOLDER in path.parents:
            continue
        tree = ast.parse(path.read_text())
        found += [
            f"{path.relative_to(SRC)}:{line}: {text!r}" for line, text in _grammar_strings(tree)
        ]
    assert found == [], "spell these through cpg_core._policy's model or writer"


def test_the_grammar_test_sees_a_key_however_it_is_written() -> None:
    """The check above is not blind: each way a module could spell a key is caught."""
    import ast

    sample = ast.parse(
        'rule.get("toPorts")\n'
        'lines.append("    - matchLabels:")\n'
        'key = side + "Endpoints"\n'
        'f"  - {side}Entities:"\n'
        'message = "add a label to spec.endpointSelector.matchLabels"\n'
    )
    assert [text for _, text in _grammar_strings(sample)] == [
        "toPorts",
        "    - matchLabels:",
        "Endpoints",
        "Entities:",
    ]


def _composition_faults(folder: Path) -> list[str]:
    """Where a layer's classes are not composed of values: a class that inherits from
    another class of the layer, or a private field (``self._x = …`` in an ``__init__``) of
    one module's class touched in another module."""
    trees = {path.name: ast.parse(path.read_text()) for path in sorted(folder.glob("*.py"))}
    classes = {
        node.name: name
        for name, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }
    faults = []
    owners: dict[str, set[str]] = {}
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                faults += [
                    f"{name}: {node.name} inherits {base.id}"
                    for base in node.bases
                    if isinstance(base, ast.Name) and base.id in classes
                ]
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                for field in ast.walk(node):  # the fields a class declares
                    if (
                        isinstance(field, ast.Attribute)
                        and isinstance(field.ctx, ast.Store)
                        and isinstance(field.value, ast.Name)
                        and field.value.id == "self"
                        and field.attr.startswith("_")
                    ):
                        owners.setdefault(field.attr, set()).add(name)
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or node.attr not in owners:
                continue
            own = isinstance(node.value, ast.Name) and node.value.id == "self"
            others = owners[node.attr] - {name}
            if (own and name not in owners[node.attr]) or (not own and others):
                faults.append(f"{name} touches {node.attr} of {', '.join(sorted(others))}")
    return sorted(set(faults))


def test_the_aggregator_is_composed_of_values() -> None:
    """The synthesis layer composes: no class of it inherits from another of it, and each
    private field is touched only in the module of the class that holds it (the entries
    and their counts are one value the aggregator holds)."""
    assert _composition_faults(SRC / "cpg_core" / "_synthesis") == []


def test_the_composition_check_sees_a_chain_and_a_borrowed_field(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class Counts:\n    def __init__(self):\n        self._n = 0\n")
    (tmp_path / "b.py").write_text(
        "from a import Counts\n\nclass More(Counts):\n    def bump(self):\n        self._n += 1\n"
    )
    assert _composition_faults(tmp_path) == [
        "b.py touches _n of a.py",
        "b.py: More inherits Counts",
    ]
