"""natal from Python beside pylance and deltalake, in one run on the same data.

Rows: a key, three numeric columns and a 100-byte string, written from one pyarrow table.
Figures: write throughput, a full `to_arrow()` read, and a take of 1,000 random rows
(pylance's `take` by row position; natal's by the `_rowid`s of the rows at the same
positions), each the best of NATAL_BENCH_RUNS runs (default 3).

    pip install ./python pylance==14.0.2 deltalake
    NATAL_BENCH_ROWS=10000000 python python/benches/bench_python.py /tmp/natal-bench
"""

import os
import random
import shutil
import sys
import time

import pyarrow as pa

import natal

ROWS = int(os.environ.get("NATAL_BENCH_ROWS", "10000000"))
RUNS = int(os.environ.get("NATAL_BENCH_RUNS", "3"))


def data(rows: int) -> pa.Table:
    import numpy as np

    rng = np.random.default_rng(7)
    text = np.array([f"{i:0100d}" for i in range(1000)], dtype=object)
    return pa.table(
        {
            "key": pa.array(np.arange(rows, dtype=np.int64)),
            "a": pa.array(rng.integers(0, 1 << 40, rows, dtype=np.int64)),
            "b": pa.array(rng.random(rows)),
            "c": pa.array(rng.integers(0, 1000, rows, dtype=np.int32)),
            "s": pa.array(text[np.arange(rows) % 1000].tolist(), pa.string()),
        }
    )


def best(label: str, run) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    fastest = min(times)
    print(f"{label:<44} {fastest * 1000:>10.1f} ms", flush=True)
    return fastest


def main(directory: str) -> None:
    table = data(ROWS)
    size = table.nbytes
    print(f"{ROWS:,} rows, {size / 1e6:,.0f} MB in Arrow; best of {RUNS}")
    ids = random.Random(11).sample(range(ROWS), 1000)
    results = {}

    def fresh(name: str) -> str:
        path = os.path.join(directory, name)
        shutil.rmtree(path, ignore_errors=True)
        return path

    # natal
    root = os.path.join(directory, "natal")
    results["natal write"] = best(
        "natal write_table", lambda: natal.write_table(fresh("natal") + "/t", table)
    )
    t = natal.open_table(root + "/t")
    assert t.to_arrow().num_rows == ROWS
    results["natal read"] = best("natal to_arrow", lambda: t.to_arrow())
    # The rows at the same positions: natal's ids are (fragment, offset) addresses.
    all_ids = t.to_arrow(columns=["key"], with_row_id=True).sort_by("key").column("_rowid")
    row_ids = [all_ids[i].as_py() for i in ids]
    results["natal take"] = best("natal take 1,000 ids", lambda: t.take(row_ids))

    try:
        import lance
    except ImportError:
        lance = None
    if lance is not None:
        path = os.path.join(directory, "lance")
        results["lance write"] = best(
            "pylance write_dataset", lambda: lance.write_dataset(table, fresh("lance"))
        )
        ds = lance.dataset(path)
        assert ds.to_table().num_rows == ROWS
        results["lance read"] = best("pylance to_table", lambda: ds.to_table())
        results["lance take"] = best("pylance take 1,000 indices", lambda: ds.take(ids))

    try:
        import deltalake
    except ImportError:
        deltalake = None
    if deltalake is not None:
        path = os.path.join(directory, "delta")
        results["delta write"] = best(
            "deltalake write_deltalake", lambda: deltalake.write_deltalake(fresh("delta"), table)
        )
        dt = deltalake.DeltaTable(path)
        assert dt.to_pyarrow_table().num_rows == ROWS
        results["delta read"] = best(
            "deltalake to_pyarrow_table", lambda: dt.to_pyarrow_table()
        )

    print()
    for what in ("write", "read", "take"):
        ours = results[f"natal {what}"]
        for peer in ("lance", "delta"):
            theirs = results.get(f"{peer} {what}")
            if theirs:
                print(f"natal/{peer} {what}: {ours / theirs:.2f}x")
    print(f"natal write throughput: {size / results['natal write'] / 1e6:,.0f} MB/s")
    for name in ("natal", "lance", "delta"):
        path = os.path.join(directory, name)
        if os.path.isdir(path):
            stored = sum(
                os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
            )
            print(f"{name} on disk: {stored / 1e6:,.0f} MB")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/natal-python-bench")
