"""Blob values as read-only binary files that fetch only the ranges read."""

from __future__ import annotations

import io as _io
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from natal._natal import NotFoundError

if TYPE_CHECKING:
    from natal import Table


class BlobFile(_io.RawIOBase):
    """A blob value as a read-only binary file: each read fetches only its range
    (``natal_blob_read``), as Lance's ``BlobFile`` does."""

    def __init__(self, table: Table, column: str, row_id: int):
        super().__init__()
        if isinstance(row_id, bool) or not isinstance(row_id, int) or row_id < 0:
            raise TypeError("a row id is an int >= 0")
        self._table = table
        self._column = column
        self._row_id = row_id
        self._position = 0
        first = self._fetch(0, 0)
        sizes = first.column("size")
        if first.num_rows == 0:
            raise NotFoundError(f"row id {row_id} does not name a live row")
        size = sizes[0].as_py()
        self._size = 0 if size is None else size

    def _fetch(self, offset: int, length: int) -> pa.Table:
        return self._table._call("blob_read", self._column, self._row_id, offset, length)

    def size(self) -> int:
        """The whole value's size in bytes."""
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = _io.SEEK_SET) -> int:
        if whence == _io.SEEK_SET:
            position = offset
        elif whence == _io.SEEK_CUR:
            position = self._position + offset
        elif whence == _io.SEEK_END:
            position = self._size + offset
        else:
            raise ValueError(f"whence must be 0, 1 or 2, got {whence}")
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._position = position
        return position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), max(self._size - self._position, 0))
        if wanted == 0:
            return 0
        data = self._fetch(self._position, wanted).column("data")[0].as_py() or b""
        view[: len(data)] = data
        self._position += len(data)
        return len(data)
