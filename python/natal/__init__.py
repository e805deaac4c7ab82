"""natal: a versioned table format for Apache DataFusion where a row's id is its birth address.

Arrow goes in and out: any object with ``__arrow_c_stream__`` or ``__arrow_c_array__``
(pyarrow tables and readers, polars and pandas DataFrames) is written as a stream, and reads
return ``pyarrow`` tables or streaming ``pyarrow.RecordBatchReader`` objects. Filters, new
values and conditions are SQL text, evaluated by natal's DataFusion session, so every
natal SQL feature is reachable (``Catalog.sql``). A ``Table`` registers in
datafusion-python's ``SessionContext`` through DataFusion's FFI.

    import natal
    db = natal.connect("/data/lake")
    t = db.create_table("events", pyarrow_table)
    t.update({"label": "'x'"}, where="id % 10 = 0")
    t.take([0, 5]).to_pylist()
"""

from __future__ import annotations

import importlib.metadata as _metadata
from typing import Any, Iterable, Literal, Mapping, Sequence

import pyarrow as pa

from natal.blob import BlobFile
from natal.reports import (
    CleanupReport,
    CloneReport,
    CommitReport,
    CompactReport,
    IndexReport,
    RowsReport,
    _report,
)
from natal._natal import (
    DATAFUSION_MAJOR,
    Catalog as _Catalog,
    ConflictError,
    CorruptError,
    NatalError,
    NotFoundError,
    Table as _Table,
)

__all__ = [
    "Catalog",
    "Table",
    "BlobFile",
    "MergeInsertBuilder",
    "CommitReport",
    "RowsReport",
    "CompactReport",
    "CleanupReport",
    "IndexReport",
    "CloneReport",
    "connect",
    "write_table",
    "open_table",
    "NatalError",
    "ConflictError",
    "CorruptError",
    "NotFoundError",
]


def _check_datafusion() -> None:
    """Refuses to load beside a datafusion-python of another major: the FFI layouts
    differ between majors, and a table handed across would crash the process."""
    try:
        installed = _metadata.version("datafusion")
    except _metadata.PackageNotFoundError:
        return
    major = installed.split(".", 1)[0]
    if major != str(DATAFUSION_MAJOR):
        raise ImportError(
            f"natal is built with DataFusion {DATAFUSION_MAJOR}, but datafusion {installed} "
            f"is installed: their FFI differs between majors. Install "
            f"'datafusion>={DATAFUSION_MAJOR},<{DATAFUSION_MAJOR + 1}' beside natal."
        )


_check_datafusion()


# SQL text --------------------------------------------------------------------------------


def _ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _sql_type(column: str, data_type: pa.DataType) -> str:
    """The SQL type that makes a column of ``data_type``."""
    simple = {
        pa.bool_(): "BOOLEAN",
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.uint8(): "TINYINT UNSIGNED",
        pa.uint16(): "SMALLINT UNSIGNED",
        pa.uint32(): "INT UNSIGNED",
        pa.uint64(): "BIGINT UNSIGNED",
        pa.float32(): "REAL",
        pa.float64(): "DOUBLE",
        pa.string(): "VARCHAR",
        pa.large_string(): "VARCHAR",
        pa.string_view(): "VARCHAR",
        pa.binary(): "BYTEA",
        pa.large_binary(): "BYTEA",
        pa.binary_view(): "BYTEA",
        pa.date32(): "DATE",
        pa.timestamp("ns"): "TIMESTAMP",
    }
    if data_type in simple:
        return simple[data_type]
    if pa.types.is_decimal128(data_type):
        return f"DECIMAL({data_type.precision}, {data_type.scale})"
    raise TypeError(f"column {column}: no SQL type makes a column of {data_type}")


def _literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _check_text(what: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be SQL text (a str), got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} is empty")
    return value


def _check_version(version: Any) -> int:
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"a version is an int, got {type(version).__name__}")
    if version < 1:
        raise ValueError(f"versions start at 1, got {version}")
    return version


def _arrow(data: Any) -> Any:
    """``data`` as something with the Arrow PyCapsule interface: as given when it has it;
    a pandas DataFrame without it, or a list of dicts, through pyarrow."""
    if hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__"):
        return data
    if isinstance(data, pa.Schema):
        return data.empty_table()
    if type(data).__name__ == "DataFrame" and hasattr(data, "to_dict"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, list) and all(isinstance(row, Mapping) for row in data):
        return pa.Table.from_pylist(data)
    return data


# Catalog ---------------------------------------------------------------------------------


class Catalog:
    """The natal tables under one root: a directory, ``s3://bucket/prefix`` or
    ``memory://``. Made by :func:`connect`."""

    def __init__(self, root: str, storage_options: Mapping[str, str] | None = None):
        if not isinstance(root, str):
            raise TypeError(f"a root is a path or URL (str), got {type(root).__name__}")
        options = None if storage_options is None else dict(storage_options)
        self._inner = _Catalog(root, options)

    @property
    def root(self) -> str:
        """The root, as a URL."""
        return self._inner.root

    def sql(self, query: str) -> pa.Table:
        """Runs one SQL statement with natal's SQL (``t@v3``, ``"t$rows"``, the
        ``natal_*`` functions, ``MERGE``, ...) and returns its result. Ctrl-C stops it."""
        stream = self._inner.sql_gathered(_check_text("the query", query))
        return pa.RecordBatchReader.from_stream(stream).read_all()

    def sql_batches(self, query: str) -> pa.RecordBatchReader:
        """As :meth:`sql`, the result streamed: batches are read as the reader is."""
        stream = self._inner.sql(_check_text("the query", query))
        return pa.RecordBatchReader.from_stream(stream)

    def tables(self) -> list[str]:
        """The names of the tables under the root."""
        return self._inner.table_names()

    def create_table(self, name: str, data: Any) -> Table:
        """Creates table ``name`` holding ``data`` (Arrow data, streamed; a
        ``pyarrow.Schema`` makes an empty table of it). ``FileExistsError`` when the table
        exists."""
        return Table(self, self._inner.create_table(name, _arrow(data)))

    def open_table(self, name: str) -> Table:
        """Table ``name``; ``NotFoundError`` when there is none."""
        return Table(self, self._inner.open_table(name))

    def write_table(
        self,
        name: str,
        data: Any,
        mode: Literal["create", "append", "overwrite"] = "create",
    ) -> Table:
        """Writes ``data`` to table ``name``: ``create`` a new table (an error if it
        exists), ``append`` to it or ``overwrite`` it (either creates it if missing)."""
        if mode not in ("create", "append", "overwrite"):
            raise ValueError(f"mode must be 'create', 'append' or 'overwrite', got {mode!r}")
        if mode == "create":
            return self.create_table(name, data)
        try:
            table = self.open_table(name)
        except NotFoundError:
            return self.create_table(name, data)
        if mode == "append":
            table.append(data)
        else:
            table.overwrite(data)
        return table

    def register_functions(self, ctx: Any) -> list[str]:
        """Registers the ``natal_*`` table functions (``natal_changes``, ``natal_compact``,
        ...), bound to this catalog's tables, in a datafusion-python ``SessionContext``;
        returns their names."""
        from datafusion import udtf

        names = []
        for function in self._inner.table_functions():
            ctx.register_udtf(udtf(function, function.name))
            names.append(function.name)
        return names

    def drop_table(self, name: str) -> None:
        """Deletes table ``name`` and every file of it."""
        self.sql(f"DROP TABLE {_ident(name)}")

    def __repr__(self) -> str:
        return f"natal.Catalog({self.root!r})"


def connect(root: str, storage_options: Mapping[str, str] | None = None) -> Catalog:
    """The catalog of natal tables under ``root`` (a directory, made if missing;
    ``s3://bucket/prefix`` with credentials from the environment and ``storage_options``
    such as ``{"aws_endpoint": "http://127.0.0.1:9000", "aws_allow_http": "true"}``; or
    ``memory://``, this process's memory)."""
    return Catalog(root, storage_options)


def _split(uri: str) -> tuple[str, str]:
    if not isinstance(uri, str):
        raise TypeError(f"a table URI is a str, got {type(uri).__name__}")
    root, _, name = uri.rstrip("/").rpartition("/")
    if not name or not root:
        raise ValueError(f"{uri!r} names no table: give <root>/<name>")
    if root.endswith(":/"):
        root += "/"
    return root, name


def write_table(
    uri: str,
    data: Any,
    mode: Literal["create", "append", "overwrite"] = "create",
    storage_options: Mapping[str, str] | None = None,
) -> Table:
    """Writes ``data`` to the table at ``uri`` (``<root>/<name>``), as
    :meth:`Catalog.write_table` does."""
    root, name = _split(uri)
    return connect(root, storage_options).write_table(name, data, mode)


def open_table(uri: str, storage_options: Mapping[str, str] | None = None) -> Table:
    """The table at ``uri`` (``<root>/<name>``)."""
    root, name = _split(uri)
    return connect(root, storage_options).open_table(name)


# Table -----------------------------------------------------------------------------------


class Table:
    """A natal table: its latest version at each call, or one version
    (:meth:`checkout`), read-only."""

    def __init__(self, catalog: Catalog, inner: _Table):
        self._catalog = catalog
        self._inner = inner

    # Naming and versions.

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    @property
    def version(self) -> int:
        """The version read: the one checked out, or the latest now."""
        return self._inner.version

    @property
    def pinned_version(self) -> int | None:
        """The version checked out, or ``None`` for the latest."""
        return self._inner.pinned_version

    @property
    def schema(self) -> pa.Schema:
        return pa.RecordBatchReader.from_stream(self._inner.schema_stream()).schema

    def _sql_name(self, suffix: str = "") -> str:
        pinned = self.pinned_version
        at = "" if pinned is None else f"@v{pinned}"
        return _ident(f"{self.name}{at}{suffix}")

    def _writable(self) -> None:
        if self.pinned_version is not None:
            raise ValueError(
                f"version {self.pinned_version} of table {self.name!r} is checked out, and "
                f"versions are read-only: write through checkout_latest()"
            )

    def _call(self, function: str, *args: Any) -> pa.Table:
        """``SELECT * FROM natal_<function>('<name>', args...)``."""
        rendered = [_literal(self.name)]
        for arg in args:
            rendered.append(_literal(arg) if isinstance(arg, str) else str(int(arg)))
        return self._catalog.sql(f"SELECT * FROM natal_{function}({', '.join(rendered)})")

    def versions(self) -> pa.Table:
        """The retained versions: number, time, operation and what each changed."""
        return self._catalog.sql(f"SELECT * FROM {_ident(self.name + '$versions')}")

    def checkout(self, version: int) -> Table:
        """This table at ``version``, read-only; ``NotFoundError`` if it is gone."""
        return Table(self._catalog, self._inner.checkout(_check_version(version)))

    def checkout_latest(self) -> Table:
        """This table at its latest version, writable."""
        return Table(self._catalog, self._inner.checkout_latest())

    # Reading.

    def _select(
        self,
        columns: Sequence[str] | None,
        filter: str | None,
        with_row_id: bool,
        limit: int | None,
    ) -> str:
        if isinstance(columns, str):
            raise TypeError("columns is a list of names, not one str")
        names = list(columns) if columns is not None else None
        if with_row_id:
            picked = ", ".join(_ident(c) for c in (names or self.schema.names))
            query = f"SELECT {picked}, _rowid FROM {self._sql_name('$rows')}"
        else:
            picked = "*" if names is None else ", ".join(_ident(c) for c in names)
            query = f"SELECT {picked} FROM {self._sql_name()}"
        if filter is not None:
            query += f" WHERE {_check_text('the filter', filter)}"
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise ValueError(f"limit must be an int >= 0, got {limit!r}")
            query += f" LIMIT {limit}"
        return query

    def to_batches(
        self,
        columns: Sequence[str] | None = None,
        filter: str | None = None,
        with_row_id: bool = False,
        limit: int | None = None,
    ) -> pa.RecordBatchReader:
        """The rows (``filter`` as SQL), streamed as the reader is read; ``with_row_id``
        adds each row's ``_rowid``."""
        return self._catalog.sql_batches(self._select(columns, filter, with_row_id, limit))

    def to_arrow(
        self,
        columns: Sequence[str] | None = None,
        filter: str | None = None,
        with_row_id: bool = False,
        limit: int | None = None,
    ) -> pa.Table:
        """The rows as one ``pyarrow.Table`` (see :meth:`to_batches`)."""
        return self._catalog.sql(self._select(columns, filter, with_row_id, limit))

    def to_pandas(self, **kwargs: Any) -> Any:
        return self.to_arrow(**kwargs).to_pandas()

    def count_rows(self, filter: str | None = None) -> int:
        """Live rows (from the manifest, nothing read), or those ``filter`` keeps."""
        if filter is None:
            return self._inner.count_all_rows()
        query = f"SELECT count(*) AS n FROM {self._sql_name()} WHERE {_check_text('the filter', filter)}"
        return self._catalog.sql(query).column(0)[0].as_py()

    def take(
        self,
        row_ids: Iterable[int],
        columns: Sequence[str] | None = None,
        with_row_id: bool = False,
    ) -> pa.Table:
        """The rows with these ids, in that order, wherever compaction or updates moved
        them. An id that names no live row is a ``NotFoundError`` (no row is returned for
        it silently)."""
        ids = list(row_ids)
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids):
            raise TypeError("row ids are ints >= 0")
        names = None if columns is None else list(columns)
        stream = self._inner.take(ids, names, with_row_id)
        return pa.RecordBatchReader.from_stream(stream).read_all()

    def nearest(
        self,
        column: str,
        vector: Sequence[float],
        k: int = 10,
        metric: Literal["l2", "cosine", "dot"] = "l2",
        filter: str | None = None,
        columns: Sequence[str] | None = None,
        nprobes: int | None = None,
        refine_factor: int | None = None,
    ) -> pa.Table:
        """The ``k`` rows whose vectors in ``column`` are nearest ``vector`` (of those
        ``filter`` keeps), nearest first, with ``_rowid`` and ``_distance``. A vector index
        on the column ranking by ``metric`` answers it (``nprobes`` partitions per segment,
        ``refine_factor`` for a quantized index); without one the search is exact."""
        functions = {"l2": "l2_distance", "cosine": "cosine_distance", "dot": "inner_product"}
        if metric not in functions:
            raise ValueError(f"metric must be 'l2', 'cosine' or 'dot', got {metric!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an int >= 1, got {k!r}")
        components = [float(x) for x in vector]
        if not components or any(x != x or x in (float("inf"), float("-inf")) for x in components):
            raise ValueError("the query vector needs finite components")
        schema = self.schema
        if column not in schema.names:
            raise ValueError(f"no column named {column!r}")
        column_type = schema.field(column).type
        if not pa.types.is_fixed_size_list(column_type):
            raise ValueError(f"column {column!r} holds {column_type}, not vectors")
        if column_type.list_size != len(components):
            raise ValueError(
                f"column {column!r} holds vectors of {column_type.list_size} components; "
                f"the query vector has {len(components)}"
            )
        literal = "[" + ", ".join(repr(x) for x in components) + "]"
        distance = f"{functions[metric]}({_ident(_check_text('the column', column))}, {literal})"
        names = list(columns) if columns is not None else self.schema.names
        picked = ", ".join(_ident(c) for c in names)
        query = f"SELECT {picked}, _rowid, {distance} AS _distance FROM {self._sql_name('$rows')}"
        if filter is not None:
            query += f" WHERE {_check_text('the filter', filter)}"
        order = "DESC" if metric == "dot" else "ASC"
        query += f" ORDER BY _distance {order} LIMIT {k}"
        options = {"natal.nprobes": nprobes, "natal.refine_factor": refine_factor}
        set_here = []
        try:
            for option, value in options.items():
                if value is not None:
                    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                        raise ValueError(f"{option.split('.')[1]} must be an int >= 1")
                    self._catalog.sql(f"SET {option} = {value}")
                    set_here.append(option)
            return self._catalog.sql(query)
        finally:
            for option in set_here:
                self._catalog.sql(f"RESET {option}")

    def blob(self, column: str, row_id: int) -> BlobFile:
        """The value of blob column ``column`` in row ``row_id`` as a read-only file that
        fetches only the ranges read."""
        return BlobFile(self, column, row_id)

    def changes(self, from_version: int, to_version: int | None = None) -> pa.Table:
        """The rows changed after ``from_version`` up to ``to_version`` (the latest when
        not given): the table's columns, ``_rowid``, ``_change_type``
        (``insert``, ``delete``, ``update_preimage``, ``update_postimage``),
        ``_commit_version`` and ``_commit_timestamp``."""
        args = [_check_version(from_version)]
        if to_version is not None:
            args.append(_check_version(to_version))
        return self._call("changes", *args)

    # Writing.

    def append(self, data: Any) -> CommitReport:
        """Appends ``data`` (Arrow data, streamed)."""
        self._writable()
        return CommitReport(**self._inner.append(_arrow(data)))

    def overwrite(self, data: Any) -> CommitReport:
        """Replaces every row by ``data``; ids are never reused."""
        self._writable()
        return CommitReport(**self._inner.overwrite(_arrow(data)))

    def _rows(self, statement: str) -> RowsReport:
        result = self._catalog.sql(statement)
        rows = result.column(0)[0].as_py() if result.num_rows else 0
        return RowsReport(version=self.version, rows=rows)

    def delete(self, where: str) -> RowsReport:
        """Deletes the rows ``where`` (SQL) keeps."""
        self._writable()
        return self._rows(f"DELETE FROM {self._sql_name()} WHERE {_check_text('where', where)}")

    def update(self, values: Mapping[str, str], where: str | None = None) -> RowsReport:
        """Sets columns to SQL expressions (``{"label": "'x'", "score": "score * 2"}``) in
        the rows ``where`` keeps (all when ``None``). Ids stay; a few narrow columns are
        written as row patches, not whole rows."""
        self._writable()
        if not isinstance(values, Mapping) or not values:
            raise ValueError("values maps at least one column to a SQL expression")
        assignments = ", ".join(
            f"{_ident(column)} = {_check_text(f'the value of {column}', expr)}"
            for column, expr in values.items()
        )
        statement = f"UPDATE {self._sql_name()} SET {assignments}"
        if where is not None:
            statement += f" WHERE {_check_text('where', where)}"
        return self._rows(statement)

    def merge_insert(self, on: str | Sequence[str]) -> MergeInsertBuilder:
        """A merge of new data on key column(s) ``on``, Lance's shape:
        ``t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
        .execute(data)``."""
        self._writable()
        keys = [on] if isinstance(on, str) else list(on)
        if not keys:
            raise ValueError("merge_insert needs at least one key column")
        return MergeInsertBuilder(self, keys)

    def add_columns(
        self, columns: Mapping[str, str] | pa.Field | pa.Schema | Sequence[pa.Field]
    ) -> int:
        """Adds columns, as Lance's ``add_columns`` does: a mapping of names to SQL expressions
        over the table's columns (``{"double_x": "x * 2"}``), each row given its value (the
        column's type is the expression's), or ``pyarrow`` fields (or a schema) for columns
        all null. Returns the version after the last."""
        self._writable()
        if isinstance(columns, pa.Field):
            columns = [columns]
        if isinstance(columns, Mapping):
            table = _ident(self.name)
            for name, expression in columns.items():
                _check_text(f"column {name}'s expression", expression)
                # The expression's type, from a plan over the table that reads no row.
                probe = self._catalog.sql(f"SELECT {expression} AS v FROM {table} LIMIT 0")
                sql_type = _sql_type(name, probe.schema.field(0).type)
                self._catalog.sql(
                    f"ALTER TABLE {table} ADD COLUMN {_ident(name)} {sql_type} DEFAULT {expression}"
                )
            return self.version
        if not isinstance(columns, (pa.Schema, Sequence)) or isinstance(columns, str):
            raise TypeError(
                "add_columns takes {name: SQL expression}, pyarrow fields or a schema, "
                f"got {type(columns).__name__}"
            )
        version = self.version
        for field in columns:
            if not isinstance(field, pa.Field):
                raise TypeError(f"add_columns takes pyarrow fields, got {type(field).__name__}")
            sql_type = _sql_type(field.name, field.type)
            version = self._call("add_column", field.name, sql_type).column("version")[0].as_py()
        return version

    def alter_columns(self, *alterations: Mapping[str, Any]) -> int:
        """Changes columns: each alteration is ``{"path": ..., "name": new_name}``,
        ``{"path": ..., "data_type": "BIGINT"}`` or ``{"path": ..., "nullable": True}``.
        Returns the version after the last."""
        self._writable()
        version = self.version
        for alteration in alterations:
            path = alteration.get("path")
            if not isinstance(path, str):
                raise ValueError(f"an alteration names its column by 'path': {alteration!r}")
            unknown = set(alteration) - {"path", "name", "data_type", "nullable"}
            if unknown:
                raise ValueError(f"unknown alteration keys {sorted(unknown)}")
            if "data_type" in alteration:
                result = self._call("alter_column", path, alteration["data_type"])
                version = result.column("version")[0].as_py()
            if alteration.get("nullable") is True:
                result = self._call("alter_column", path, "DROP NOT NULL")
                version = result.column("version")[0].as_py()
            elif alteration.get("nullable") is False:
                raise ValueError("a column cannot be made NOT NULL")
            if "name" in alteration:
                result = self._call("rename_column", path, alteration["name"])
                version = result.column("version")[0].as_py()
        return version

    def drop_columns(self, names: Sequence[str]) -> int:
        """Drops columns (no data is rewritten); returns the version after the last."""
        self._writable()
        if isinstance(names, str):
            names = [names]
        version = self.version
        for name in names:
            version = self._call("drop_column", name).column("version")[0].as_py()
        return version

    # Maintenance.

    def compact(self) -> CompactReport:
        """Merges small fragments and folds deletions and row patches into new files."""
        self._writable()
        return _report(CompactReport, self._call("compact"))

    def cleanup(
        self,
        keep_versions: int = 10,
        older_than_seconds: int = 7 * 24 * 3600,
        min_file_age_seconds: int = 3600,
    ) -> CleanupReport:
        """Removes versions beyond the newest ``keep_versions`` that are older than
        ``older_than_seconds``, and the files only they named."""
        return _report(
            CleanupReport,
            self._call("cleanup", keep_versions, older_than_seconds, min_file_age_seconds),
        )

    def restore(self, version: int) -> int:
        """Makes ``version``'s rows the latest again (a new version); returns it."""
        self._writable()
        return self._call("restore", _check_version(version)).column("version")[0].as_py()

    def create_index(
        self,
        column: str,
        name: str | None = None,
        index_type: str | None = None,
        options: str | None = None,
    ) -> IndexReport:
        """Indexes ``column``: a scalar index by default, ``index_type="ivf_flat"`` (with
        ``options`` such as ``"partitions=256, metric=l2"``) for vectors."""
        self._writable()
        args: list[Any] = [column]
        if name is not None or index_type is not None:
            args.append(name if name is not None else f"{column}_idx")
        if index_type is not None:
            args.append(index_type)
            if options is not None:
                args.append(options)
        elif options is not None:
            raise ValueError("options are for a vector index: give index_type too")
        return _report(IndexReport, self._call("create_index", *args))

    def shallow_clone(self, target: str, version: int | None = None) -> CloneReport:
        """A new table ``target`` (a name under the root, or a path or URL) sharing this
        table's files at ``version`` (the latest when not given)."""
        return self._clone(target, version, "shallow")

    def deep_clone(self, target: str, version: int | None = None) -> CloneReport:
        """A new table ``target`` with copies of this table's files at ``version``."""
        return self._clone(target, version, "deep")

    def _clone(self, target: str, version: int | None, how: str) -> CloneReport:
        at = _check_version(version) if version is not None else self.version
        return _report(CloneReport, self._call("clone", target, at, how))

    # DataFusion.

    def __datafusion_table_provider__(self, session: Any) -> Any:
        """The table for datafusion-python's ``SessionContext.register_table``."""
        return self._inner.__datafusion_table_provider__(session)

    def __repr__(self) -> str:
        return repr(self._inner)


class MergeInsertBuilder:
    """What a merge does with matched and unmatched rows (:meth:`Table.merge_insert`)."""

    def __init__(self, table: Table, on: list[str]):
        self._table = table
        self._on = on
        self._update: tuple[bool, str | None] = (False, None)
        self._insert = False
        self._delete: tuple[bool, str | None] = (False, None)

    def when_matched_update_all(self, condition: str | None = None) -> MergeInsertBuilder:
        """Matched target rows take the source row's values (where ``condition`` holds,
        SQL over ``target`` and ``source``)."""
        self._update = (True, condition)
        return self

    def when_not_matched_insert_all(self) -> MergeInsertBuilder:
        """Source rows matching no target row are inserted."""
        self._insert = True
        return self

    def when_not_matched_by_source_delete(self, condition: str | None = None) -> MergeInsertBuilder:
        """Target rows no source row matches are deleted (where ``condition`` holds)."""
        self._delete = (True, condition)
        return self

    def execute(self, data: Any) -> RowsReport:
        """Runs the merge with ``data`` (Arrow data) as the source, in one version."""
        if not (self._update[0] or self._insert or self._delete[0]):
            raise ValueError("the merge does nothing: call a when_... method first")
        table = self._table
        catalog = table.catalog
        source = catalog._inner.register_source(_arrow(data))
        try:
            names = catalog.sql(f"SELECT * FROM {source} LIMIT 0").schema.names
            missing = [k for k in self._on if k not in names]
            if missing:
                raise ValueError(f"the source has no key column {missing[0]!r}")
            on = " AND ".join(f"target.{_ident(k)} = source.{_ident(k)}" for k in self._on)
            clauses = []
            updated, condition = self._update
            if updated:
                sets = ", ".join(
                    f"{_ident(c)} = source.{_ident(c)}" for c in names if c not in self._on
                )
                when = f" AND {condition}" if condition else ""
                if sets:
                    clauses.append(f"WHEN MATCHED{when} THEN UPDATE SET {sets}")
            if self._insert:
                columns = ", ".join(_ident(c) for c in names)
                values = ", ".join(f"source.{_ident(c)}" for c in names)
                clauses.append(f"WHEN NOT MATCHED THEN INSERT ({columns}) VALUES ({values})")
            deleted, condition = self._delete
            if deleted:
                when = f" AND {condition}" if condition else ""
                clauses.append(f"WHEN NOT MATCHED BY SOURCE{when} THEN DELETE")
            if not clauses:
                return RowsReport(version=table.version, rows=0)
            statement = (
                f"MERGE INTO {table._sql_name()} AS target USING {source} AS source "
                f"ON {on} {' '.join(clauses)}"
            )
            return table._rows(statement)
        finally:
            catalog._inner.deregister_source(source)
