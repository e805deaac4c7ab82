"""The benchmark table's rows for the Lance sides of the benches (`lance_clone.py`,
`lance_changes.py`): `id` counting up, `val` uniform in 0..1M (seeded), `payload` =
"payload-" and the id in 12 digits — what `benches/common/mod.rs` writes for natal."""

import numpy as np
import pyarrow as pa

SCHEMA = pa.schema(
    [pa.field("id", pa.int64()), pa.field("val", pa.int64()), pa.field("payload", pa.string())]
)


def bench_rows(rows):
    """A reader of `rows` rows, in batches of 65,536."""
    rng = np.random.default_rng(7)

    def batches():
        start = 0
        while start < rows:
            n = min(1 << 16, rows - start)
            ids = np.arange(start, start + n, dtype=np.int64)
            yield pa.record_batch(
                [
                    pa.array(ids),
                    pa.array(rng.integers(0, 1_000_000, n, dtype=np.int64)),
                    pa.array([f"payload-{i:012d}" for i in ids]),
                ],
                schema=SCHEMA,
            )
            start += n

    return pa.RecordBatchReader.from_batches(SCHEMA, batches())
