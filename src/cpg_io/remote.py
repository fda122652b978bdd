"""Captures named by URL (``s3://bucket/prefix/*.log.gz``, ``gs://…``, ``az://…``,
``file://…``), read through fsspec and the storage library of each scheme.

The storage libraries are optional extras (``pip install 'cpg[s3]'``); credentials come from
each library's usual environment and config files, never from cpg. Every message that names
a URL names it without what could be a secret in it (user info, a query string such as an
Azure SAS token).
"""

from __future__ import annotations

import os
import re
from typing import Any

from cpg_io.errors import MissingExtra, SecretInURL, SourceError

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_GLOB_CHARS = frozenset("*?[")

EXTRAS = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
    "adl": "azure",
}
"""The cpg extra that brings each scheme's storage library."""


def is_url(text: str) -> bool:
    """Whether an input names a capture by URL (a scheme and ``://``)."""
    return _URL.match(text) is not None


def shown(url: str) -> str:
    """The URL as messages may show it: without user info or a query string."""
    found = _URL.match(url)
    if found is None:
        return url
    rest = url[found.end() :]
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    path, _, query = path.partition("?")
    return f"{found.group(0)}{authority}{slash}{path}{'?…' if query else ''}"


def _local_path(url: str) -> str | None:
    """The path of a ``file://`` URL (read without fsspec)."""
    if url.startswith("file://"):
        return url[len("file://") :] or "/"
    return None


def _refuse_secrets(url: str) -> None:
    authority = url.split("://", 1)[1].split("/", 1)[0]
    if "@" in authority or "?" in url:
        raise SecretInURL(
            f"{shown(url)}: cpg takes no credentials in a URL (they would end up in logs and "
            "shell history): remove the user info and the query string, and give the "
            "credentials the way the storage library reads them (e.g. AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY or a profile for s3://, GOOGLE_APPLICATION_CREDENTIALS for "
            "gs://, AZURE_STORAGE_ACCOUNT_NAME and a credential for az://)"
        )


def _filesystem(url: str) -> tuple[Any, str]:
    _refuse_secrets(url)
    scheme = url.split("://", 1)[0].lower()
    extra = EXTRAS.get(scheme)
    install = f"pip install 'cpg[{extra}]'" if extra else "pip install fsspec"
    try:
        import fsspec.core
    except ImportError:
        raise MissingExtra(f"{shown(url)}: reading {scheme}:// needs an extra: {install}") from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError:
        raise MissingExtra(f"{shown(url)}: reading {scheme}:// needs an extra: {install}") from None
    except ValueError as exc:
        if "protocol" in str(exc).lower():
            raise SourceError(
                f"{shown(url)}: cpg does not know the scheme {scheme}://; use s3://, gs://, "
                "az://, file:// or a path"
            ) from None
        raise SourceError(f"{shown(url)}: not a usable URL ({exc})") from None
    return fs, path


def _storage_error(url: str, exc: BaseException) -> SourceError:
    if isinstance(exc, FileNotFoundError):
        return SourceError(f"{shown(url)}: no such object; check the bucket and the key")
    if isinstance(exc, PermissionError):
        return SourceError(
            f"{shown(url)}: access denied; check the credentials the storage library finds "
            "(its usual environment variables and config files)"
        )
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return SourceError(f"{shown(url)}: cannot read it ({text})")


def expand_url(url: str) -> list[str]:
    """The objects a URL names: itself, every object under it when it is a prefix (a
    "folder"), or those its glob pattern matches; sorted, as full URLs."""
    fs, path = _filesystem(url)
    try:
        if _GLOB_CHARS & set(path):
            found = sorted(p for p in fs.glob(path) if fs.isfile(p))
            if not found:
                raise SourceError(f"{shown(url)}: matches no object; check the pattern")
        elif fs.isdir(path):
            found = sorted(fs.find(path))
            if not found:
                raise SourceError(f"{shown(url)}: no objects under this prefix")
        elif fs.isfile(path):
            found = [path]
        else:
            raise FileNotFoundError(path)
    except SourceError:
        raise
    except Exception as exc:  # the storage library's own errors, whatever their class
        raise _storage_error(url, exc) from None
    return [fs.unstrip_protocol(p) for p in found]


def size_of(url: str) -> int:
    local = _local_path(url)
    if local is not None:
        return os.path.getsize(local)
    fs, path = _filesystem(url)
    try:
        return int(fs.size(path))
    except Exception as exc:
        raise _storage_error(url, exc) from None


def open_raw(url: str) -> Any:
    """The object, seekable and not unwrapped (open_flow_stream unwraps gzip; byte ranges
    are read from it as it is)."""
    local = _local_path(url)
    try:
        if local is not None:
            return open(local, "rb")
        fs, path = _filesystem(url)
        return fs.open(path, "rb")
    except SourceError:
        raise
    except Exception as exc:
        raise _storage_error(url, exc) from None
