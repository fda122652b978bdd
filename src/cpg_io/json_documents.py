"""Captures that are JSON documents rather than JSON lines: a JSON array of records, or
records pretty-printed one after the other (``hubble observe -o json | jq .``). Read as the
JSON lines they hold, one compact record a line, so every reader downstream (the quick
reader, the parser, the malformed-line count) sees what a ``-o jsonpb`` capture gives it.
Such a stream is read once, in order: it is never cut into byte ranges for workers."""

from __future__ import annotations

import codecs
import io
import json
from typing import BinaryIO

import orjson

_CHUNK = 1 << 16
_MAX_RECORD = 64 << 20
"""A record larger than this is given on as one (malformed) line, unparsed."""
_WHITESPACE = " \t\r\n"


def document_kind(head: bytes) -> str:
    """``array`` or ``objects`` when the start of a capture is a JSON array or a
    pretty-printed object, else "" (JSON lines, or anything else: read line by line)."""
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"["):
        return "array"
    first = text.split(b"\n", 1)[0].strip()
    return "objects" if first == b"{" else ""


class JsonLines(io.RawIOBase):
    """The records of a JSON document stream (``kind`` from :func:`document_kind`), as JSON
    lines. What does not decode ends the conversion: the rest of the input is given on as
    one line, which the readers count as malformed."""

    def __init__(self, source: BinaryIO, kind: str) -> None:
        self._source = source
        self._decoder = json.JSONDecoder()
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._text = ""
        self._out = b""
        self._eof = False
        self._done = False
        self._array = kind == "array"
        self._opened = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._out and not self._done:
            self._out = self._next()
        size = min(len(buffer), len(self._out))
        buffer[:size] = self._out[:size]
        self._out = self._out[size:]
        return size

    def _fill(self) -> bool:
        if self._eof:
            return False
        data = self._source.read(_CHUNK)
        if not data:
            self._eof = True
            self._text += self._utf8.decode(b"", final=True)
            return False
        self._text += self._utf8.decode(data)
        return True

    def _skip(self, extra: str = "") -> None:
        """Drop whitespace (and ``extra`` separators) from the front, reading as needed."""
        chars = _WHITESPACE + extra
        while True:
            self._text = self._text.lstrip(chars)
            if self._text or not self._fill():
                return

    def _next(self) -> bytes:
        if not self._opened:
            self._skip("\ufeff")  # a byte-order mark before the document
            if self._text.startswith("["):
                self._text = self._text[1:]
            self._opened = True
        self._skip("," if self._array else "")
        if not self._text:
            self._done = True
            return b""
        if self._array and self._text.startswith("]"):
            self._text = self._text[1:]
            self._skip()
            if not self._text:
                self._done = True
                return b""
            return self._rest()  # something after the array's end
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text)
            except RecursionError:  # nested deeper than any record: the rest is malformed
                return self._rest()
            except json.JSONDecodeError:
                if len(self._text) > _MAX_RECORD or not self._fill():
                    return self._rest()
                continue
            if end == len(self._text) and not self._eof and self._fill():
                continue  # a number or literal may go on in the next chunk
            self._text = self._text[end:]
            return orjson.dumps(value) + b"\n"

    def _rest(self) -> bytes:
        """Everything left, as one line the readers will count as malformed."""
        while self._fill():
            if len(self._text) > _MAX_RECORD:
                break
        rest, self._text = self._text, ""
        self._done = True
        return rest.replace("\n", " ").encode("utf-8", "replace") + b"\n"


def as_json_lines(stream: BinaryIO, head: bytes) -> BinaryIO | None:
    """A buffered JSON-lines view of ``stream`` when ``head`` (its first bytes) shows a JSON
    document, else None."""
    kind = document_kind(head)
    if not kind:
        return None
    return io.BufferedReader(JsonLines(stream, kind), buffer_size=_CHUNK)
