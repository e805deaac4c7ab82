"""natal on an S3-compatible server (CI starts SeaweedFS and sets NATAL_TEST_S3_ENDPOINT;
skipped without one): storage options, writes, reads, and the table in datafusion-python."""

import os
import uuid

import pyarrow as pa
import pytest

import natal

ENDPOINT = os.environ.get("NATAL_TEST_S3_ENDPOINT")
pytestmark = pytest.mark.skipif(not ENDPOINT, reason="no S3 server (NATAL_TEST_S3_ENDPOINT)")


@pytest.fixture
def db():
    bucket = os.environ.get("NATAL_TEST_S3_BUCKET", "natal")
    options = {
        "aws_endpoint": ENDPOINT,
        "aws_allow_http": "true",
        "aws_access_key_id": os.environ.get("AWS_ACCESS_KEY_ID", ""),
        "aws_secret_access_key": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
    }
    return natal.connect(f"s3://{bucket}/python-{uuid.uuid4().hex}", storage_options=options)


def test_a_table_on_s3(db):
    t = db.create_table("t", pa.table({"id": pa.array(range(50), pa.int64()), "v": ["a"] * 50}))
    t.append(pa.table({"id": pa.array([50], pa.int64()), "v": ["b"]}))
    t.update({"v": "'c'"}, where="id = 3")
    assert db.tables() == ["t"]
    assert t.count_rows() == 51
    assert t.take([3], columns=["v"]).column("v").to_pylist() == ["c"]
    assert t.checkout(2).count_rows("v = 'c'") == 0
    assert t.to_arrow(filter="id >= 49").num_rows == 2


def test_an_s3_table_in_datafusion_python(db):
    datafusion = pytest.importorskip("datafusion")
    t = db.create_table("t", pa.table({"id": pa.array(range(10), pa.int64())}))
    ctx = datafusion.SessionContext()
    ctx.register_table("t", t)
    result = ctx.sql("SELECT sum(id) AS s FROM t").to_arrow_table()
    assert result.column("s")[0].as_py() == 45
