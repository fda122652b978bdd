"""The import rules of DESIGN §2: a pure core and two composition roots that never meet."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

# Modules that do I/O, read the environment or the clock, or belong to an adapter.
FORBIDDEN_IN_CORE = {
    "os",
    "sys",
    "io",
    "socket",
    "subprocess",
    "logging",
    "pathlib",
    "time",
    "tempfile",
    "shutil",
    "gzip",
    "threading",
    "asyncio",
    "multiprocessing",
    "urllib",
    "http",
    "select",
    "signal",
    "secrets",
    "uuid",
    "random",
    "grpc",
    "kubernetes",
    "mcp",
    "typer",
    "rich",
    "click",
    "cpg_io",
    "cpg_cli",
    "cpg_mcp",
}
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval", "breakpoint"}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


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


def test_core_imports_nothing_that_does_io() -> None:
    modules = sorted((SRC / "cpg_core").rglob("*.py"))
    assert modules, "cpg_core has no modules"
    for path in modules:
        bad = _imports(path) & FORBIDDEN_IN_CORE
        assert not bad, f"{path.name} imports {sorted(bad)}: cpg_core must stay pure"
        calls = _calls(path) & (FORBIDDEN_CALLS | {"." + c for c in CLOCK_CALLS})
        assert not calls, f"{path.name} calls {sorted(calls)}: cpg_core must stay pure"


def test_composition_roots_never_import_each_other() -> None:
    for package, other in (("cpg_cli", "cpg_mcp"), ("cpg_mcp", "cpg_cli")):
        for path in sorted((SRC / package).rglob("*.py")):
            assert other not in _imports(path), f"{path} imports {other}"


def test_io_layer_holds_no_cli_or_mcp_code() -> None:
    for path in sorted((SRC / "cpg_io").rglob("*.py")):
        assert not _imports(path) & {"cpg_cli", "cpg_mcp", "typer"}, path


def test_the_check_itself_catches_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "bad.py"
    sample.write_text(
        "import os\nfrom cpg_io.store import PolicyStore\nopen('x')\ndatetime.now()\n"
    )
    assert {"os", "cpg_io"} <= _imports(sample) & FORBIDDEN_IN_CORE
    assert {"open", ".now"} <= _calls(sample)


def test_public_api_is_importable_and_small() -> None:
    import cpg_core

    for name in cpg_core.__all__:
        assert hasattr(cpg_core, name), name
    assert len(cpg_core.__all__) <= 60


def test_adapters_take_the_public_api_from_cpg_core_itself() -> None:
    """What cpg_core exports is imported from ``cpg_core``, never from its private modules:
    the adapters use the same API a notebook does."""
    import cpg_core

    public = set(cpg_core.__all__)
    used = set()
    for package in ("cpg_io", "cpg_cli", "cpg_mcp"):
        for path in sorted((SRC / package).rglob("*.py")):
            if "_proto" in path.parts:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom) or not node.module:
                    continue
                names = {alias.name for alias in node.names}
                if node.module.startswith("cpg_core."):
                    leaked = names & public
                    assert not leaked, f"{path}: import {sorted(leaked)} from cpg_core"
                elif node.module == "cpg_core":
                    used |= names
    assert len(used) > 30, "the adapters use the public API"
