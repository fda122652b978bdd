"""Atomic file writes and the policy store ``<output-dir>/<namespace>/<workload>.yaml``.

A reader never sees a partial file: text goes to a temp file in the same folder, is fsynced,
then renamed over the target (keeping the old file's mode and owner). A file whose content
would not change is not touched at all. Runs writing into the same folder take turns
(:func:`folder_lock`); temp files a killed run left behind are removed by the next one;
nothing is written through a symbolic link out of the folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from pathlib import Path

from cpg_core import RequestError, check_target
from cpg_io.errors import StoreError

log = logging.getLogger("cpg.store")
TEMP_SUFFIX = ".cpg-tmp"
"""cpg's temp files end so (``.NAME.RANDOM.cpg-tmp``): the only ones a run ever removes."""
_OWN_TEMP = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.cpg-tmp$")
_OLD_TEMP = re.compile(r"^\..+\.(?:yaml|yml|json)\.[A-Za-z0-9_]{8}\.tmp$")
"""What cpg 0.2 named its temp files (a killed run may have left one)."""


class WriteOutcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


def _keep_mode_and_owner(fd: int, target: Path, mode: int) -> None:
    """The new file gets the mode and owner of the file it replaces (``mode`` when new)."""
    try:
        old = os.stat(target)  # a link: the file it leads to, never the link's own 0777
    except FileNotFoundError:  # no file, or a link that leads nowhere
        os.fchmod(fd, mode)
        return
    os.fchmod(fd, old.st_mode & 0o7777)
    if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
        with contextlib.suppress(PermissionError):  # only root may give a file away
            os.fchown(fd, old.st_uid, old.st_gid)


def atomic_write_text(path: Path, text: str, mode: int = 0o644, *, sync_dir: bool = True) -> None:
    """Write ``text`` so that readers see the old file or the new one, never a mix. With
    ``sync_dir=False`` the caller fsyncs the folder itself (see :func:`fsync_dirs`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
            _keep_mode_and_owner(handle.fileno(), path, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync_dir:
        fsync_dirs([path.parent])


def fsync_dirs(folders: Iterable[Path]) -> None:
    """Make renames in these folders durable (once per folder, however many files moved)."""
    for folder in sorted(set(folders)):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class StagedWrites:
    """Many files replaced as one batch: each goes to a temp file beside its target; at commit
    all temp files are fsynced concurrently (so they share journal commits), then renamed into
    place, then each folder is fsynced once. Readers never see a partial file, and a crash
    before the renames leaves every old file as it was."""

    def __init__(self) -> None:
        self._staged: list[tuple[str, Path]] = []
        self._lock = threading.Lock()
        self._folders: set[Path] = set()  # made (or found) already: one mkdir per folder

    def stage(self, path: Path, text: str, mode: int = 0o644) -> None:
        if path.parent not in self._folders:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._folders.add(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode("utf-8"))
                _keep_mode_and_owner(handle.fileno(), path, mode)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        with self._lock:
            self._staged.append((tmp, path))

    def stage_removal(self, path: Path) -> None:
        """Remove ``path`` when the batch commits (after its renames)."""
        with self._lock:
            self._staged.append(("", path))

    def take(self) -> list[tuple[str, Path]]:
        """Hand the staged files over (to another process's batch); this batch forgets them."""
        with self._lock:
            staged, self._staged = self._staged, []
        return staged

    def adopt(self, staged: list[tuple[str, Path]]) -> None:
        with self._lock:
            self._staged.extend(staged)

    def commit(self) -> None:
        with self._lock:
            staged, self._staged = self._staged, []
        if not staged:
            return
        try:
            with ThreadPoolExecutor(16) as pool:  # concurrent fsyncs share journal commits
                list(pool.map(_fsync_path, (tmp for tmp, _ in staged if tmp)))
            for tmp, path in staged:
                if not tmp:  # a removal
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                    continue
                try:
                    os.replace(tmp, path)
                except OSError as exc:
                    raise StoreError(
                        f"{path}: could not put the new file in place ({exc.strerror or exc}); "
                        "move whatever stands there aside"
                    ) from None
            fsync_dirs(path.parent for _, path in staged)
        except BaseException:
            self.discard(staged)  # what was not renamed yet
            raise

    def abort(self) -> None:
        with self._lock:
            staged, self._staged = self._staged, []
        self.discard(staged)

    @staticmethod
    def discard(staged: Iterable[tuple[str, Path]]) -> None:
        """Remove staged temp files (of a batch that will not commit)."""
        for tmp, _ in staged:
            if tmp:  # a removal stages no file
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def safe_component(value: str, what: str) -> str:
    """A namespace (a DNS-1123 label) or workload that is safe as one path component."""
    try:
        return check_target(value, what)
    except RequestError as exc:
        raise StoreError(f"refusing to use it as a file name: {exc}") from None


MAX_READ_BYTES = 64 * 1024 * 1024
"""The most cpg reads of one policy, evidence or plan file: a folder from a pull request is
untrusted, and a link to /dev/zero must not exhaust memory."""


class RefusedFile(StoreError):
    """A file cpg will not read: a symlink out of its folder, not a regular file, too big."""


def read_bounded(
    path: Path,
    limit: int = MAX_READ_BYTES,
    inside: Path | None = None,
    resolved: dict[Path, Path] | None = None,
) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes. With ``inside``, a symlink
    that resolves outside that folder is refused. RefusedFile says which rule it broke;
    OSError (FileNotFoundError…) passes through. ``resolved`` keeps the real path of each
    folder for a caller that reads many files of few folders in one go (a file that is no
    symlink is then its folder's real path and its name: no walk of the whole path)."""
    found = os.lstat(path)  # a file that is not there (a first run's) costs one call
    if resolved is None or stat.S_ISLNK(found.st_mode):
        real = path.resolve()
    else:
        real = _real_folder(path.parent, resolved) / path.name
    if inside is not None and not real.is_relative_to(_real_folder(inside, resolved)):
        raise RefusedFile(f"{path}: a symlink that leads out of {inside} (to {real}); refused")
    mode = os.stat(real).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    if not stat.S_ISREG(mode):
        raise RefusedFile(f"{path}: not a regular file (a device, FIFO or socket); refused")
    with open(real, "rb") as handle:
        # Asking for limit + 1 bytes at once makes a 64 MiB buffer for every small file;
        # the size it has now is read instead, and more only if it grew (or says 0, as
        # files under /proc do).
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(min(size, limit) + 1)
        if len(data) > size:
            data += handle.read(limit + 1 - len(data))
    if len(data) > limit:
        raise RefusedFile(f"{path}: larger than {limit >> 20} MiB; refused")
    return data


def _real_folder(folder: Path, resolved: dict[Path, Path] | None) -> Path:
    if resolved is None:
        return folder.resolve()
    real = resolved.get(folder)
    if real is None:
        real = resolved[folder] = folder.resolve()
    return real


def read_text(
    path: Path, what: str, inside: Path | None = None, resolved: dict[Path, Path] | None = None
) -> str | None:
    """A text file's content; None when it does not exist; StoreError naming the path and
    the fix for anything else (a folder in its place, no permission, not UTF-8, a symlink
    out of ``inside``, a device, too big…). ``resolved``: as :func:`read_bounded`."""
    try:
        return read_bounded(path, inside=inside, resolved=resolved).decode("utf-8")
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise StoreError(
            f"{path}: a file stands where a folder of {what} files should be; move it aside"
        ) from None
    except IsADirectoryError:
        raise StoreError(f"{path}: is a folder, not a {what} file; move it aside") from None
    except PermissionError:
        raise StoreError(
            f"{path}: permission denied; make it readable for this user or move it aside"
        ) from None
    except UnicodeDecodeError:
        raise StoreError(f"{path}: not UTF-8 text; move it aside and run again") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def check_folder(folder: Path, what: str, *, create: bool = True) -> Path:
    """``folder`` made if missing; StoreError when something else stands there or it cannot
    be made. With ``create=False`` nothing is made: only whether it could be is checked (a run
    that fails later leaves no empty folder behind)."""
    if not create:
        return _check_could_make(folder, what)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StoreError(
            f"{folder}: is a file, not a folder for {what}; choose another folder"
        ) from None
    except NotADirectoryError:
        raise StoreError(
            f"{folder}: a file stands in its path; choose another folder for {what}"
        ) from None
    except OSError as exc:
        raise StoreError(f"{folder}: cannot make the folder ({exc.strerror or exc})") from None
    if not folder.is_dir():
        raise StoreError(f"{folder}: is not a folder; choose another folder for {what}")
    return folder


def _check_could_make(folder: Path, what: str) -> Path:
    existing = folder
    while not existing.exists() and not existing.is_symlink():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing == folder and folder.is_dir():
        writable = os.access(folder, os.W_OK | os.X_OK)
    elif existing.is_dir():
        writable = os.access(existing, os.W_OK | os.X_OK)
    elif existing == folder:
        raise StoreError(f"{folder}: is a file, not a folder for {what}; choose another folder")
    else:
        raise StoreError(f"{folder}: a file stands in its path; choose another folder for {what}")
    if not writable and existing == folder:
        raise StoreError(
            f"{folder}: cpg cannot write {what} there (permission denied); mount it writable, "
            "or give the pod's user (fsGroup) the folder"
        )
    if not writable:
        raise StoreError(
            f"{folder}: cannot make the folder (permission denied in {existing}); choose "
            f"another folder for {what}"
        )
    return folder


def check_writable(folder: Path, what: str) -> None:
    """StoreError naming the reason when cpg cannot write files in ``folder`` (a volume
    mounted read-only, an owner that is not the pod's ``fsGroup``, a full disk): a live
    session says so at its start, not at its first flush. A folder not there yet is checked
    for whether it could be made."""
    _check_could_make(folder, what)
    if not folder.is_dir():
        return
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-check.", suffix=TEMP_SUFFIX, dir=folder)
    except OSError as exc:
        raise StoreError(
            f"{folder}: cpg cannot write {what} there ({exc.strerror or exc}); mount it "
            "writable, or give the pod's user (fsGroup) the folder"
        ) from None
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(probe)


def namespaced_stems(root: Path, pattern: str) -> Iterator[tuple[str, str]]:
    """(folder, stem) of every file matching ``pattern`` one folder below ``root``, sorted:
    a store's (namespace, workload) pairs."""
    if not root.is_dir():
        return
    for ns_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for path in sorted(ns_dir.glob(pattern)):
            yield ns_dir.name, path.stem


def inside(root: Path, path: Path) -> Path:
    """``path`` when every folder between ``root`` and it is a real folder, not a link that
    could lead out of ``root``; StoreError otherwise."""
    current = root
    for part in path.relative_to(root).parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise StoreError(
                f"{current}: is a symbolic link; cpg writes only inside {root}, so replace the "
                "link with a folder (or choose another output folder)"
            )
    return path


def remove_stale_temp_files(folder: Path) -> int:
    """Temp files a killed run left in ``folder`` and its subfolders (call it holding the
    folder's lock, when no other run can be staging). How many were removed."""
    removed = 0
    if not folder.is_dir():
        return 0
    for current, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # .git and the like: never cpg's
        for name in files:
            if _OWN_TEMP.match(name) or _OLD_TEMP.match(name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(current, name))
                    removed += 1
    if removed:
        log.info("removed %d temp files an interrupted run left in %s", removed, folder)
    return removed


@contextlib.contextmanager
def folder_lock(folder: Path, what: str) -> Iterator[None]:
    """Hold ``folder`` for one run's read-merge-write: a second run writing there waits for
    the first to finish (an advisory lock on the folder itself; it ends with the process)."""
    check_folder(folder, what)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StoreError(f"{folder}: cannot lock it ({exc.strerror})") from None
            log.warning("another cpg run is writing to %s; waiting for it to finish", folder)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


RESERVED_STEMS = frozenset({"kustomization"})
"""File names a policy never takes: ``kubectl apply -k``, Argo CD and Flux read
``kustomization.yaml`` (any case) as the folder's kustomization, not as a resource."""


class PolicyStore:
    """Policies on disk, one YAML file per (namespace, workload). Writes are staged in
    ``batch`` when one is given (then visible after its commit), else written at once."""

    def __init__(self, root: Path, batch: StagedWrites | None = None) -> None:
        self.root = root
        self.batch = batch

    def path_for(self, namespace: str, workload: str) -> Path:
        stem = safe_component(workload, "workload")
        if stem.lower() in RESERVED_STEMS:  # kustomize would read it as the folder's list
            stem += "-cpg"
        path = self.root / safe_component(namespace, "namespace") / (stem + ".yaml")
        return inside(self.root, path)

    def targets(self) -> Iterator[tuple[str, str]]:
        """(namespace, workload) of every policy file, sorted."""
        return namespaced_stems(self.root, "*.yaml")

    def read(self, path: Path) -> str | None:
        return read_text(path, "policy")

    def write(self, path: Path, text: str, existing: str | None) -> WriteOutcome:
        if existing == text:
            return WriteOutcome.UNCHANGED
        try:
            if self.batch is not None:
                self.batch.stage(path, text)
            else:
                atomic_write_text(path, text)
        except OSError as exc:
            raise StoreError(f"{path}: could not write ({exc.strerror or exc})") from None
        return WriteOutcome.CREATED if existing is None else WriteOutcome.UPDATED

    def remove(self, path: Path) -> None:
        """Remove one of cpg's files (every rule of it now in a shared policy), with the
        batch when there is one."""
        try:
            if self.batch is not None:
                self.batch.stage_removal(path)
            else:
                path.unlink(missing_ok=True)
                fsync_dirs([path.parent])
        except OSError as exc:
            raise StoreError(f"{path}: could not remove it ({exc.strerror or exc})") from None
