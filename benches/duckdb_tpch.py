"""DuckDB's side of the TPC-H bench (`benches/tpch.rs`): a reference, not a target.

    python duckdb_tpch.py <parquet dir> <queries.json> <runs>

`<parquet dir>` holds one directory of Parquet files per table (DataFusion's `COPY` output);
`queries.json` maps query numbers to their SQL. Each run is a fresh in-memory connection with
a view per table over its files, so every run reads the files again, as the Rust side's fresh
sessions do. Prints one JSON object: per query, the median milliseconds and the rows returned.
"""

import json
import os
import statistics
import sys
import time

import duckdb

TABLES = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]


def connect(parquet_dir):
    con = duckdb.connect()
    for table in TABLES:
        files = os.path.join(parquet_dir, table, "*.parquet")
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{files}')")
    return con


def main():
    parquet_dir, queries_file, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(queries_file) as f:
        queries = json.load(f)
    out = {}
    for number, sql in queries.items():
        times = []
        rows = 0
        for _ in range(runs):
            con = connect(parquet_dir)
            start = time.perf_counter()
            rows = len(con.execute(sql).fetchall())
            times.append((time.perf_counter() - start) * 1e3)
            con.close()
        out[number] = {"ms": statistics.median(times), "rows": rows}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
