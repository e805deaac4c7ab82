"""TPC-H over natal tables from Python: datafusion-python 55 with the tables registered
through DataFusion's FFI, against natal's own session (the engine of the `natal` CLI) run
from the same package, on the same tables, in one run.

The tables and query texts come from the Rust bench, kept:

    NATAL_TPCH_KEEP=1 NATAL_BENCH_PYTHON=<python with duckdb> NATAL_TPCH_CHURN=0 \
        cargo bench --bench tpch      # prints "tables kept in <dir>"
    python python/benches/tpch_ffi.py <dir>/natal <dir>/parquet/queries.json [runs]

Each run of a query is a fresh session (tables registered again, before the clock starts),
as the Rust bench's are; the figure is the median of the runs, planning included. Answers
are compared by row count.
"""

import json
import statistics
import sys
import time

import datafusion

import natal

TABLES = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]


def ffi_session(root: str) -> datafusion.SessionContext:
    db = natal.connect(root)
    ctx = datafusion.SessionContext()
    for name in TABLES:
        ctx.register_table(name, db.open_table(name))
    return ctx


def median_ms(session, run, runs: int) -> tuple[float, int]:
    """The median time of `run` over `runs` fresh sessions made by `session` (made before
    the clock starts, as the Rust bench's are)."""
    times, rows = [], 0
    for _ in range(runs):
        ctx = session()
        start = time.perf_counter()
        rows = run(ctx)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), rows


def main() -> None:
    root, queries_file = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    with open(queries_file) as f:
        queries = json.load(f)
    total_ffi = total_natal = 0.0
    print(f"{'query':>5} {'FFI ms':>10} {'natal ms':>10} {'ratio':>7}")
    for number, sql in sorted(queries.items(), key=lambda kv: int(kv[0])):

        def through_ffi(ctx) -> int:
            return sum(b.num_rows for b in ctx.sql(sql).collect())

        def through_natal(db) -> int:
            return db.sql(sql).num_rows

        ffi_ms, ffi_rows = median_ms(lambda: ffi_session(root), through_ffi, runs)
        natal_ms, natal_rows = median_ms(lambda: natal.connect(root), through_natal, runs)
        if ffi_rows != natal_rows:
            raise SystemExit(f"q{number}: FFI returned {ffi_rows} rows, natal {natal_rows}")
        total_ffi += ffi_ms
        total_natal += natal_ms
        print(f"{'q' + number:>5} {ffi_ms:>10.0f} {natal_ms:>10.0f} {ffi_ms / natal_ms:>6.2f}x", flush=True)
    print(f"{'total':>5} {total_ffi:>10.0f} {total_natal:>10.0f} {total_ffi / total_natal:>6.2f}x")


if __name__ == "__main__":
    main()
