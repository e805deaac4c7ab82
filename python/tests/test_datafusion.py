"""natal tables in datafusion-python's SessionContext, through DataFusion's FFI."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import natal

datafusion = pytest.importorskip("datafusion")


@pytest.fixture
def table(tmp_path):
    db = natal.connect(str(tmp_path / "lake"))
    data = pa.table(
        {
            "id": pa.array(range(1000), pa.int64()),
            "kind": pa.array([i % 4 for i in range(1000)], pa.int32()),
        }
    )
    return db.create_table("events", data)


def test_a_session_joins_a_natal_table_with_a_parquet_file(tmp_path, table):
    kinds = pa.table({"kind": pa.array([0, 1, 2, 3], pa.int32()), "name": ["a", "b", "c", "d"]})
    pq.write_table(kinds, str(tmp_path / "kinds.parquet"))
    ctx = datafusion.SessionContext()
    ctx.register_table("events", table)
    ctx.register_parquet("kinds", str(tmp_path / "kinds.parquet"))
    result = ctx.sql(
        "SELECT k.name, count(*) AS n FROM events e JOIN kinds k ON e.kind = k.kind "
        "WHERE e.id < 100 GROUP BY k.name ORDER BY k.name"
    ).to_arrow_table()
    assert result.column("name").to_pylist() == ["a", "b", "c", "d"]
    assert result.column("n").to_pylist() == [25, 25, 25, 25]
    limited = ctx.sql("SELECT id FROM events LIMIT 3").to_arrow_table()
    assert limited.num_rows == 3


def test_insert_into_through_the_ffi_commits_a_version(table):
    ctx = datafusion.SessionContext()
    ctx.register_table("events", table)
    ctx.sql("INSERT INTO events VALUES (5000, 1), (5001, 2)").collect()
    assert table.version == 2
    assert table.count_rows() == 1002
    assert table.count_rows("id >= 5000") == 2


def test_a_checked_out_version_reads_as_it_was(table):
    table.delete("id >= 10")
    ctx = datafusion.SessionContext()
    ctx.register_table("then", table.checkout(1))
    ctx.register_table("now", table)
    then = ctx.sql("SELECT count(*) AS n FROM then").to_arrow_table()
    now = ctx.sql("SELECT count(*) AS n FROM now").to_arrow_table()
    assert then.column("n")[0].as_py() == 1000
    assert now.column("n")[0].as_py() == 10


def test_a_session_that_is_not_one_is_refused(table):
    with pytest.raises(TypeError, match="SessionContext"):
        table.__datafusion_table_provider__(object())


def test_natal_functions_register_as_table_functions(table):
    ctx = datafusion.SessionContext()
    names = table.catalog.register_functions(ctx)
    assert "natal_changes" in names and "natal_compact" in names
    table.delete("id < 10")
    changes = ctx.sql("SELECT count(*) AS n FROM natal_changes('events', 1)").to_arrow_table()
    assert changes.column("n")[0].as_py() == 10
    compacted = ctx.sql("SELECT version FROM natal_compact('events')").to_arrow_table()
    assert compacted.column("version")[0].as_py() == table.version
