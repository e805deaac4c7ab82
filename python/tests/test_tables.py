"""natal from Python: catalogs, writes from Arrow data, reads, versions, updates keeping ids,
merges, maintenance, blobs, and bad input."""

import io
import os
import signal
import threading

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import natal


def rows(n, start=0):
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "label": [f"l{i}" for i in ids],
            "score": [float(i) / 2 for i in ids],
        }
    )


@pytest.fixture
def db(tmp_path):
    return natal.connect(str(tmp_path / "lake"))


@pytest.fixture
def table(db):
    return db.create_table("t", rows(100))


def test_create_read_and_list(db, table):
    assert db.tables() == ["t"]
    assert table.version == 1
    assert table.count_rows() == 100
    assert table.schema.names == ["id", "label", "score"]
    got = table.to_arrow().sort_by("id")
    assert got.column("id").to_pylist() == list(range(100))
    assert got.column("label").to_pylist()[:2] == ["l0", "l1"]
    picked = table.to_arrow(columns=["score"], filter="id < 3")
    assert sorted(picked.column("score").to_pylist()) == [0.0, 0.5, 1.0]
    assert picked.schema.names == ["score"]
    assert table.count_rows("id >= 90") == 10
    assert db.open_table("t").count_rows() == 100
    assert table.to_arrow(limit=7).num_rows == 7


def test_batches_stream(table):
    reader = table.to_batches(columns=["id"])
    assert isinstance(reader, pa.RecordBatchReader)
    total = sum(batch.num_rows for batch in reader)
    assert total == 100


def test_sql_reaches_natal_features(db, table):
    result = db.sql('SELECT count(*) AS n FROM "t$fragments"')
    assert result.column("n")[0].as_py() >= 1
    with_ids = db.sql('SELECT id, _rowid FROM "t$rows" WHERE id = 4')
    assert with_ids.column("_rowid")[0].as_py() == 4


def test_update_keeps_ids_and_take_follows_them(table):
    before = table.to_arrow(with_row_id=True, filter="id IN (3, 50)").sort_by("id")
    ids = before.column("_rowid").to_pylist()
    report = table.update({"label": "'x'", "score": "score + 100"}, where="id IN (3, 50)")
    assert report.rows == 2
    assert report.version == 2
    after = table.to_arrow(with_row_id=True, filter="id IN (3, 50)").sort_by("id")
    assert after.column("_rowid").to_pylist() == ids
    assert after.column("label").to_pylist() == ["x", "x"]
    taken = table.take(list(reversed(ids)), columns=["id", "score"])
    assert taken.column("id").to_pylist() == [50, 3]
    assert taken.column("score").to_pylist() == [125.0, 101.5]
    # Compaction moves rows; their ids still find them.
    table.delete("id % 2 = 1 AND id <> 3")
    table.compact()
    again = table.take(ids, with_row_id=True)
    assert again.column("_rowid").to_pylist() == ids
    assert again.column("label").to_pylist() == ["x", "x"]


def test_versions_checkout_restore_and_changes(table):
    table.append(rows(5, start=100))
    table.delete("id < 10")
    versions = table.versions()
    assert versions.num_rows == 3
    first = table.checkout(1)
    assert first.count_rows() == 100
    assert first.version == 1
    assert table.count_rows() == 95
    with pytest.raises(ValueError, match="read-only"):
        first.append(rows(1))
    changes = table.changes(1)
    kinds = pc.value_counts(changes.column("_change_type")).to_pylist()
    assert {k["values"]: k["counts"] for k in kinds} == {"insert": 5, "delete": 10}
    restored = table.restore(1)
    assert restored == 4
    assert table.count_rows() == 100


def test_append_overwrite_and_write_modes(tmp_path):
    uri = str(tmp_path / "root" / "w")
    t = natal.write_table(uri, rows(10))
    assert t.count_rows() == 10
    natal.write_table(uri, rows(5, start=10), mode="append")
    assert t.count_rows() == 15
    report = natal.write_table(uri, rows(3), mode="overwrite").version
    assert report == 3
    assert natal.open_table(uri).count_rows() == 3
    with pytest.raises(FileExistsError):
        natal.write_table(uri, rows(1))
    with pytest.raises(ValueError, match="mode"):
        natal.write_table(uri, rows(1), mode="upsert")


def test_writes_from_record_batches_readers_and_pandas(db):
    batch = rows(4).to_batches()[0]
    t = db.create_table("b", batch)
    reader = pa.RecordBatchReader.from_batches(batch.schema, [batch, batch])
    assert t.append(reader).rows_added == 8
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"id": [100, 101], "label": ["p", "q"], "score": [1.0, 2.0]})
    assert t.append(frame).rows_added == 2
    assert t.count_rows() == 14
    assert t.append([{"id": 7, "label": "d", "score": 0.5}]).rows_added == 1


def test_an_empty_table_from_a_schema(db):
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    t = db.create_table("empty", schema)
    assert t.count_rows() == 0
    assert t.schema.names == ["id", "name"]
    t.append(pa.table({"id": [1], "name": ["a"]}, schema=schema))
    assert t.to_pandas()["name"].tolist() == ["a"]


def test_one_natal_table_streams_into_another(db, table):
    copy = db.create_table("copy", table.to_batches(filter="id < 60"))
    assert copy.count_rows() == 60
    report = copy.append(table.to_batches(filter="id >= 60"))
    assert report.rows_added == 40
    assert copy.to_arrow().sort_by("id").equals(table.to_arrow().sort_by("id"))


def test_writes_from_polars(db):
    polars = pytest.importorskip("polars")
    frame = polars.DataFrame({"id": [1, 2], "label": ["a", "b"], "score": [0.1, 0.2]})
    t = db.create_table("p", frame)
    assert t.to_arrow().column("label").to_pylist() == ["a", "b"]


def test_merge_insert(table):
    source = pa.table(
        {"id": pa.array([1, 2, 500], pa.int64()), "label": ["m1", "m2", "new"], "score": [9.0, 9.0, 9.0]}
    )
    report = (
        table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
    )
    assert report.rows == 3
    got = table.to_arrow(filter="id IN (1, 2, 500)").sort_by("id")
    assert got.column("label").to_pylist() == ["m1", "m2", "new"]
    assert table.count_rows() == 101
    only_insert = table.merge_insert(["id"]).when_not_matched_insert_all()
    assert only_insert.execute(source).rows == 0
    with pytest.raises(ValueError, match="key column"):
        table.merge_insert("nope").when_not_matched_insert_all().execute(source)
    with pytest.raises(ValueError, match="does nothing"):
        table.merge_insert("id").execute(source)


def test_schema_changes(table):
    before = table.to_arrow()
    version = table.add_columns({"double_id": "id * 2", "tagged": "label || '!'"})
    assert version == table.version
    added = table.to_arrow(columns=["id", "double_id", "tagged"])
    assert added.schema.field("double_id").type == pa.int64()
    labels = dict(zip(before.column("id").to_pylist(), before.column("label").to_pylist()))
    for row in added.to_pylist():
        assert row["double_id"] == 2 * row["id"]
        label = labels[row["id"]]
        assert row["tagged"] == (None if label is None else label + "!")
    table.drop_columns(["double_id", "tagged"])
    table.add_columns(pa.field("flag", pa.bool_()))
    assert "flag" in table.schema.names
    assert table.to_arrow(columns=["flag"]).column("flag").null_count == table.count_rows()
    version = table.version
    with pytest.raises(ValueError, match="nope"):
        table.add_columns({"bad": "nope + 1"})
    with pytest.raises(TypeError, match="no SQL type"):
        table.add_columns(pa.field("l", pa.list_(pa.int64())))
    with pytest.raises(TypeError, match="expression"):
        table.add_columns({"bad": 3})
    assert table.version == version
    table.alter_columns({"path": "flag", "name": "checked"})
    assert "checked" in table.schema.names
    table.drop_columns(["checked"])
    assert table.schema.names == ["id", "label", "score"]


def test_maintenance_index_and_clones(db, table):
    for start in (100, 200):
        table.append(rows(10, start=start))
    compacted = table.compact()
    assert compacted.fragments_removed >= 2
    index = table.create_index("id")
    assert index.rows_indexed == 120
    clone = table.shallow_clone("copy")
    assert clone.live_rows == 120
    assert db.open_table("copy").count_rows() == 120
    deep = table.deep_clone("deep", version=1)
    assert deep.live_rows == 100
    cleaned = table.cleanup(keep_versions=1, older_than_seconds=0, min_file_age_seconds=0)
    assert cleaned.versions_removed >= 1
    db.drop_table("copy")
    assert "copy" not in db.tables()


def test_blob_reads_by_range(db):
    db.sql("CREATE TABLE docs (id BIGINT, body BLOB)")
    payload = bytes(range(256)) * 1000
    docs = db.open_table("docs")
    docs.append(pa.table({"id": pa.array([1], pa.int64()), "body": pa.array([payload], pa.large_binary())}))
    blob = docs.blob("body", 0)
    assert blob.size() == len(payload)
    blob.seek(1000)
    assert blob.read(10) == payload[1000:1010]
    assert blob.tell() == 1010
    blob.seek(-5, io.SEEK_END)
    assert blob.read() == payload[-5:]
    assert blob.read(3) == b""
    reader = io.BufferedReader(docs.blob("body", 0), buffer_size=4096)
    assert reader.read() == payload


def test_bad_input(db, table):
    version = table.version
    wrong = pa.table({"id": ["not a number"], "label": ["x"], "score": [1.0]})
    with pytest.raises(ValueError, match="column 'id'"):
        table.append(wrong)
    assert table.version == version
    with pytest.raises(ValueError):
        table.to_arrow(columns=["nope"])
    with pytest.raises(ValueError):
        table.to_arrow(filter="id >>> 3")
    with pytest.raises(ValueError):
        table.update({"nope": "1"})
    with pytest.raises(natal.NotFoundError):
        table.checkout(99)
    with pytest.raises(natal.NotFoundError):
        table.take([123456])
    with pytest.raises(natal.NotFoundError):
        db.open_table("missing")
    with pytest.raises(TypeError):
        table.append(42)
    with pytest.raises(TypeError):
        table.take(["a"])
    with pytest.raises(TypeError):
        table.checkout("1")
    with pytest.raises(ValueError):
        db.create_table("../escape", rows(1))
    with pytest.raises(TypeError):
        natal.connect(3)
    with pytest.raises(ValueError, match="storage_options"):
        natal.connect(db.root, storage_options={"aws_region": "x"})
    with pytest.raises(ValueError, match="unknown S3 storage option"):
        natal.connect("s3://bucket/lake", storage_options={"no_such_option": "1"})
    with pytest.raises(ValueError, match="unknown GCS storage option"):
        natal.connect("gs://bucket/lake", storage_options={"no_such_option": "1"})
    with pytest.raises(ValueError, match="unsupported scheme"):
        natal.connect("ftp://host/lake")
    assert table.version == version


def test_memory_root_is_shared_in_the_process():
    natal.write_table("memory:///shared", rows(3), mode="overwrite")
    assert natal.open_table("memory:///shared").count_rows() == 3


def test_a_datafusion_of_another_major_is_refused(monkeypatch):
    monkeypatch.setattr(natal._metadata, "version", lambda name: "54.1.0")
    with pytest.raises(ImportError, match="54.1.0"):
        natal._check_datafusion()


def test_a_write_that_loses_to_a_concurrent_one_is_a_conflict(db, table):
    other = db.open_table("t")

    def batches():
        yield rows(2, start=1000).to_batches()[0]
        # Another writer replaces the table while this append streams its rows.
        writer = threading.Thread(target=lambda: other.overwrite(rows(1)))
        writer.start()
        writer.join()
        yield rows(2, start=2000).to_batches()[0]

    reader = pa.RecordBatchReader.from_batches(rows(1).schema, batches())
    with pytest.raises(natal.ConflictError, match="conflict"):
        table.append(reader)
    # The overwrite's row only: nothing of the append is left.
    assert table.count_rows() == 1
    assert table.version == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the platform has no fork")
def test_a_forked_child_reads_on_a_runtime_of_its_own(table):
    assert table.count_rows() == 100  # the parent's runtime is running
    pid = os.fork()
    if pid == 0:
        try:
            code = 0 if table.to_arrow().num_rows == 100 else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert table.count_rows() == 100


def test_ctrl_c_stops_a_long_statement(db):
    # Far more rows than the test waits for: only the interrupt ends it.
    query = "SELECT count(*) FROM generate_series(1, 100000000000)"
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            db.sql(query)
    finally:
        timer.cancel()
    assert db.sql("SELECT 1 AS one").column("one")[0].as_py() == 1


def test_nearest_vectors_exactly_and_through_an_index(db):
    db.sql("CREATE TABLE frames (id BIGINT, label VARCHAR, e VECTOR(3))")
    frames = db.open_table("frames")
    vectors = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.9, 0.1, 0.0]]
    frames.append(
        pa.table(
            {
                "id": pa.array([1, 2, 3, 4], pa.int64()),
                "label": ["cat", "dog", "bird", "cat"],
                "e": pa.array(vectors, pa.list_(pa.float32(), 3)),
            }
        )
    )
    near = frames.nearest("e", [1.0, 0.05, 0.0], k=2)
    assert near.column("id").to_pylist() == [1, 4]
    assert near.column("_rowid").to_pylist() == [0, 3]
    distances = near.column("_distance").to_pylist()
    assert distances == sorted(distances)
    not_cats = frames.nearest("e", [1.0, 0.05, 0.0], k=1, metric="cosine", filter="label <> 'cat'")
    assert not_cats.column("id").to_pylist() == [2]
    frames.create_index("e", "e_idx", "ivf_flat", "partitions=2")
    indexed = frames.nearest("e", [1.0, 0.05, 0.0], k=2, nprobes=2, columns=["id"])
    assert indexed.column("id").to_pylist() == [1, 4]
    assert indexed.schema.names == ["id", "_rowid", "_distance"]
    with pytest.raises(ValueError, match="metric"):
        frames.nearest("e", [1.0, 0.0, 0.0], metric="manhattan")
    with pytest.raises(ValueError, match="finite"):
        frames.nearest("e", [float("nan"), 0.0, 0.0])
    with pytest.raises(ValueError, match="3 components"):
        frames.nearest("e", [1.0, 0.0])
    with pytest.raises(ValueError, match="not vectors"):
        frames.nearest("label", [1.0, 0.0, 0.0])


def test_a_dropped_table_is_not_found(db, table):
    db.drop_table("t")
    assert db.tables() == []
    with pytest.raises(natal.NotFoundError):
        table.count_rows()
    with pytest.raises(natal.NotFoundError):
        table.append(rows(1))
    with pytest.raises(natal.NotFoundError):
        db.open_table("t")
