"""Corruptions of a valid file as hypothesis strategies: truncation at an offset, flipped bits,
overwritten bytes, and for zip archives (``.pt2``, ``.pt``, ``.npz``) members dropped,
duplicated, swapped (contents exchanged) or corrupted inside (the archive rewritten around
them, its checksums right, so the reader gets past them to the contents)."""

from __future__ import annotations

import io
import warnings
import zipfile
from collections.abc import Callable

from hypothesis import strategies as st

#: Bytes that often mean something to a reader: zero, all ones, sign boundaries.
SPECIAL_BYTES = st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x01, 0x30, 0x7B])


def truncated(data: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    return st.integers(0, len(data) - 1).map(lambda n: (f"truncate at {n}", data[:n]))


def _flip(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    mutable = bytearray(data)
    for offset, bit in flips:
        mutable[offset % len(mutable)] ^= 1 << bit
    return bytes(mutable)


def _overwrite(data: bytes, writes: list[tuple[int, int]]) -> bytes:
    mutable = bytearray(data)
    for offset, value in writes:
        mutable[offset % len(mutable)] = value
    return bytes(mutable)


def flipped(data: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    flips = st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 7)), min_size=1,
                     max_size=8)  # fmt: skip
    return flips.map(lambda f: (f"flip bits {f}", _flip(data, f)))


def overwritten(data: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    value = SPECIAL_BYTES | st.integers(0, 255)
    writes = st.lists(st.tuples(st.integers(0, len(data) - 1), value), min_size=1, max_size=4)
    return writes.map(lambda w: (f"overwrite {w}", _overwrite(data, w)))


def byte_corruptions(data: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    """(description, corrupted bytes) of ``data``."""
    return st.one_of(truncated(data), flipped(data), overwritten(data))


def members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def rezip(entries: list[tuple[str, bytes]]) -> bytes:
    """A stored (uncompressed) zip archive of ``entries``, duplicate names kept."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Duplicate name": the point
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
            for name, content in entries:
                archive.writestr(name, content)
    return buffer.getvalue()


def _edit(entries: list[tuple[str, bytes]], operation: str, i: int, j: int,
          change: Callable[[bytes], bytes]) -> list[tuple[str, bytes]]:  # fmt: skip
    edited = list(entries)
    if operation == "drop":
        del edited[i]
    elif operation == "duplicate":
        edited.insert(j, edited[i])
    elif operation == "swap":
        (a, x), (b, y) = edited[i], edited[j]
        edited[i], edited[j] = (a, y), (b, x)
    elif operation == "reorder":
        edited.insert(j, edited.pop(i))
    else:  # "corrupt": the member's contents changed, the archive's checksums recomputed
        edited[i] = (edited[i][0], change(edited[i][1]))
    return edited


@st.composite
def member_corruptions(draw: st.DrawFn, data: bytes) -> tuple[str, bytes]:
    """(description, archive) with one member-level change to the zip archive ``data``."""
    entries = members(data)
    operation = draw(st.sampled_from(["drop", "duplicate", "swap", "reorder", "corrupt"]))
    i = draw(st.integers(0, len(entries) - 1))
    j = draw(st.integers(0, len(entries) - 1))
    content = entries[i][1] or b"\0"
    what, changed = draw(byte_corruptions(content))
    edited = _edit(entries, operation, i, j, lambda _: changed)
    detail = f": {what}" if operation == "corrupt" else f" with {entries[j][0]}"
    return f"{operation} {entries[i][0]}{detail}", rezip(edited)


def corruptions(data: bytes, is_zip: bool) -> st.SearchStrategy[tuple[str, bytes]]:
    """Every corruption of ``data``: byte-level, and member-level for a zip archive."""
    if not is_zip:
        return byte_corruptions(data)
    return st.one_of(byte_corruptions(data), member_corruptions(data))
