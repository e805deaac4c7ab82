"""What natal's operations report, as small frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import pyarrow as pa

from natal._natal import NatalError


@dataclass(frozen=True)
class CommitReport:
    """A write's commit: the version it left the table at (the one it published, or the one
    it read when it had nothing to do), and the rows it added and removed."""

    version: int
    published: bool
    rows_added: int
    rows_removed: int


@dataclass(frozen=True)
class RowsReport:
    """A delete, update or merge: the rows it changed and the table's version after it."""

    version: int
    rows: int


@dataclass(frozen=True)
class CompactReport:
    version: int
    fragments_removed: int
    fragments_added: int
    rows_rewritten: int
    deleted_rows_dropped: int


@dataclass(frozen=True)
class CleanupReport:
    versions_removed: int
    files_removed: int
    bytes_removed: int


@dataclass(frozen=True)
class IndexReport:
    version: int
    segment_seq: int
    segments_added: int
    fragments_indexed: int
    rows_indexed: int
    bytes_written: int


@dataclass(frozen=True)
class CloneReport:
    version: int
    live_rows: int
    files_copied: int
    bytes_copied: int


def _report(cls: type, result: pa.Table) -> Any:
    """The first row of a natal function's result as a report of type ``cls``."""
    row = result.slice(0, 1).to_pylist()
    if not row:
        raise NatalError(f"{cls.__name__}: the operation returned no row")
    return cls(**{f.name: row[0][f.name] for f in fields(cls)})
