"""``--kustomize``: a ``kustomization.yaml`` in each namespace folder listing cpg's policy
files, and one at the top listing the namespace folders, so ``kubectl apply -k policies/``,
Argo CD and Flux pick the policies up.

A kustomization is often a person's too: their own resources (URLs, paths that exist only
at build time, a baseline deny policy), comments, patches. cpg edits it as text and touches
only its own entries, each marked with a trailing ``# cpg``: it appends the ones missing and
removes the marked ones whose file is gone. Every other byte stays. Nothing is read through
a link that leads out of the folder, nor without a bound, and no folder that is a link is
entered: a pull request's or a person's link cannot make cpg write elsewhere."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterable
from pathlib import Path

import yaml

from cpg_core.cilium import YamlInputError, load_one, written_by_cpg
from cpg_io.errors import StoreError
from cpg_io.policy_files import MAX_FILE_BYTES
from cpg_io.store import RefusedFile, atomic_write_text, read_bounded

KUSTOMIZATION = "kustomization.yaml"
NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
"""The names kustomize reads as a folder's kustomization (one per folder)."""
MARK = "# cpg"
"""The comment that ends each entry cpg wrote: the only entries it ever removes."""
HEADER = (
    "# Written by cpg (its kustomize option): cpg keeps the entries marked '# cpg' up to date\n"
    "# and never changes anything else; add your own resources and settings freely.\n"
    "apiVersion: kustomize.config.k8s.io/v1beta1\n"
    "kind: Kustomization\n"
)
_KEY = re.compile(r"^resources[ \t]*:[ \t]*(?P<rest>.*?)[ \t]*$")
_ITEM = re.compile(r"^(?P<indent>[ \t]*)-[ \t]+(?P<value>.*?)[ \t]*$")


def _read(path: Path, root: Path) -> str | None:
    """A file's text (None when there is none), bounded and inside ``root``."""
    try:
        return read_bounded(path, MAX_FILE_BYTES, root).decode("utf-8")
    except FileNotFoundError:
        return None
    except (RefusedFile, OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: cannot read it ({exc}); fix or remove it") from None


def _is_cpg_file(path: Path, root: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    try:
        text = _read(path, root)
    except StoreError:
        return False
    return text is not None and written_by_cpg(text, str(path))


def _entries(text: str, path: Path) -> list[str]:
    """The resources a kustomization lists; StoreError naming the fix for one cpg cannot
    edit (cpg leaves a file a person wrote as it is)."""
    try:
        doc = load_one(text, str(path)) if text.strip() else {}
    except YamlInputError as exc:
        raise StoreError(f"{path}: cannot read it ({exc}); fix or remove it") from None
    if not isinstance(doc, dict):
        raise StoreError(f"{path}: not a Kustomization; fix or remove it")
    resources = doc.get("resources")
    if resources is not None and not (
        isinstance(resources, list) and all(isinstance(entry, str) for entry in resources)
    ):
        raise StoreError(
            f"{path}: resources must be a list of file or folder names; fix it (cpg leaves "
            "a file a person wrote as it is)"
        )
    return list(resources or [])


def _scalar(entry: str) -> str:
    """An entry as YAML reads it back unchanged (quoted only when it must be)."""
    try:
        plain = yaml.safe_load(entry) == entry and "#" not in entry
    except yaml.YAMLError:
        plain = False
    return entry if plain else json.dumps(entry)


def _item_value(value: str) -> tuple[str, bool]:
    """An item's entry as written (its comment cut off), and whether cpg's mark ends it."""
    marked = value.endswith(MARK) and (value == MARK or value[: -len(MARK)][-1:] in " \t")
    if marked:
        value = value[: -len(MARK)].rstrip()
    elif " #" in value and not value.startswith(("'", '"')):
        value = value.split(" #", 1)[0].rstrip()
    try:
        read = yaml.safe_load(value)
    except yaml.YAMLError:
        read = value
    return (read if isinstance(read, str) else value), marked


def edited(text: str | None, wanted: Iterable[str], path: Path) -> str | None:
    """The kustomization ``text`` with cpg's ``wanted`` entries listed, each marked, and its
    marked entries that are not wanted removed; None when nothing changes. Every other byte
    stays as it is."""
    wanted = list(dict.fromkeys(wanted))
    if text is None or not text.strip():
        if not wanted:
            return None
        return HEADER + "resources:\n" + "".join(f"- {_scalar(e)}  {MARK}\n" for e in wanted)
    listed = _entries(text, path)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    key = next((i for i, line in enumerate(lines) if _KEY.match(line)), None)
    missing = [e for e in wanted if e not in listed]
    if key is None:
        if not missing:
            return None
        added = "".join(f"- {_scalar(e)}  {MARK}\n" for e in missing)
        return "".join(lines) + "resources:\n" + added
    match = _KEY.match(lines[key])
    assert match is not None
    rest = match.group("rest")
    if rest and not rest.startswith("#"):  # a flow list, [a, b]: that one line, as a block
        if not missing:
            return None
        block = [f"- {_scalar(e)}\n" for e in listed]
        block += [f"- {_scalar(e)}  {MARK}\n" for e in missing]
        return "".join([*lines[:key], "resources:\n", *block, *lines[key + 1 :]])
    items: list[tuple[int, str, bool]] = []
    end = key + 1
    indent = ""
    while end < len(lines):
        line = lines[end]
        found = _ITEM.match(line.rstrip("\n"))
        if found and (not items or found.group("indent") == indent):
            if not items:
                indent = found.group("indent")
            items.append((end, *_item_value(found.group("value"))))
        elif line.strip() and not line.lstrip().startswith("#") and not line[:1].isspace():
            break  # the next top-level key
        end += 1
    if [entry for _, entry, _ in items] != listed:
        raise StoreError(
            f"{path}: cpg cannot add its entries without rewriting the file (an entry over "
            f"several lines, or a list it cannot follow); list these yourself: "
            f"{', '.join(missing) or 'none'}"
        )
    dropped = {n for n, entry, marked in items if marked and entry not in wanted}
    if not missing and not dropped:
        return None
    after = items[-1][0] + 1 if items else key + 1
    appended = [f"{indent}- {_scalar(e)}  {MARK}\n" for e in missing]
    kept = [line for n, line in enumerate(lines[:after]) if n not in dropped]
    return "".join([*kept, *appended, *lines[after:]])


def _update(folder: Path, wanted: list[str], root: Path) -> Path | None:
    """Bring one folder's kustomization up to date; its path when it changed."""
    existing = [folder / name for name in NAMES if (folder / name).exists()]
    if len(existing) > 1:
        raise StoreError(
            f"{folder}: holds {', '.join(p.name for p in existing)}; kustomize reads one "
            "kustomization per folder: remove the others"
        )
    path = existing[0] if existing else folder / KUSTOMIZATION
    if path.is_symlink():
        raise StoreError(f"{path}: a symlink; cpg does not write through it (replace it by a file)")
    text = edited(_read(path, root), wanted, path)
    if text is None:
        return None
    atomic_write_text(path, text)
    return path


def _folders(output_dir: Path) -> list[Path]:
    """The namespace folders: real folders only (a link is never entered)."""
    found = []
    for entry in sorted(output_dir.iterdir()):
        if entry.name.startswith("."):
            continue
        mode = entry.lstat().st_mode
        if stat.S_ISDIR(mode):
            found.append(entry)
    return found


def update_kustomizations(output_dir: Path) -> list[Path]:
    """Bring the kustomization files of ``output_dir`` up to date; the ones that changed."""
    changed = []
    folders = []
    for folder in _folders(output_dir):
        files = sorted(
            p.name
            for p in folder.iterdir()
            if p.suffix in (".yaml", ".yml") and p.name not in NAMES and _is_cpg_file(p, output_dir)
        )
        if not files and not any((folder / name).exists() for name in NAMES):
            continue
        written = _update(folder, files, output_dir)
        if written is not None:
            changed.append(written)
        if files:
            folders.append(folder.name)
    if folders:
        written = _update(output_dir, folders, output_dir)
        if written is not None:
            changed.append(written)
    return changed
