#!/usr/bin/env python3
"""The Lance side of `cargo bench --bench compare` (issue #4).

Lance (PyPI `pylance` 14.x) with stable row ids runs the same workload as natal: a table of
`id int64, val int64, payload ~20-byte string`, random updates by row id, then cold
measurements. The Rust harness runs this script once per measurement, so every measurement
is a fresh process; each prints one JSON object on stdout. This script installs nothing: run
it with the interpreter of a virtual environment set up as README.md says.

    python benches/lance_bench.py prepare --dir D --base B --rows N --fragment-rows F \
        --updates FILE
    python benches/lance_bench.py measure --dir D --what take_cold --ids FILE

Row `i` of the table has id `i` (`id` column) and Lance stable row id `i`, so the harness
names rows by number and both systems translate to their own ids.
"""

import argparse
import json
import os
import resource
import shutil
import sys
import time

import lance
import pyarrow as pa
import pyarrow.compute as pc


def peak_rss_bytes():
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


def manifest_bytes(path):
    versions = os.path.join(path, "_versions")
    newest = max(
        (os.path.join(versions, n) for n in os.listdir(versions) if n.endswith(".manifest")),
        key=os.path.getmtime,
    )
    return os.path.getsize(newest)


def table_chunk(start, length, seed):
    ids = pa.array(range(start, start + length), pa.int64())
    # A multiplicative hash of the row number: uniform in 0..1M like natal's generator.
    vals = pc.bit_wise_and(
        pc.multiply_checked(pc.add(ids, seed), 0x9E3779B1), 0x7FFFFFFF
    )
    vals = pc.cast(pc.divide(pc.multiply(vals, 1_000_000), 0x80000000), pa.int64())
    padded = pc.utf8_lpad(pc.cast(ids, pa.string()), 12, "0")
    payload = pc.binary_join_element_wise("payload-", padded, "")
    return pa.table({"id": ids, "val": vals, "payload": payload})


def create_base(base, rows, fragment_rows):
    def batches():
        step = 1 << 20
        for start in range(0, rows, step):
            yield from table_chunk(start, min(step, rows - start), 7).to_batches()

    schema = table_chunk(0, 1, 7).schema
    reader = pa.RecordBatchReader.from_batches(schema, batches())
    lance.write_dataset(
        reader,
        base,
        max_rows_per_file=fragment_rows,
        enable_stable_row_ids=True,
    )


def prepare(args):
    if not os.path.exists(args.base):
        create_base(args.base, args.rows, args.fragment_rows)
    if os.path.exists(args.dir):
        shutil.rmtree(args.dir)
    shutil.copytree(args.base, args.dir)
    update_ms, bytes_written = [], []
    with open(args.updates) as f:
        commits = [line.split() for line in f if line.strip()]
    for rows in commits:
        before = dir_bytes(args.dir)
        ds = lance.dataset(args.dir)
        start = time.perf_counter()
        ds.update({"val": "val + 1"}, where=f"_rowid IN ({','.join(rows)})")
        update_ms.append((time.perf_counter() - start) * 1e3)
        bytes_written.append(dir_bytes(args.dir) - before)
    print(
        json.dumps(
            {
                "update_ms": update_ms,
                "bytes_per_commit": bytes_written,
                "manifest_bytes": manifest_bytes(args.dir),
                "versions": lance.dataset(args.dir).version,
            }
        )
    )


def read_ids(path):
    with open(path) as f:
        return [int(x) for x in f.read().split()]


def timed(f):
    start = time.perf_counter()
    value = f()
    return value, (time.perf_counter() - start) * 1e3


def measure(args):
    out = {}
    rss_start = current_rss_bytes()
    ds, open_ms = timed(lambda: lance.dataset(args.dir))
    out["open_ms"] = open_ms
    if args.what in ("take_cold", "take_warm"):
        ids = read_ids(args.ids)
        session_before = ds.session().size_bytes()
        rss_before = current_rss_bytes()
        table, ms = timed(lambda: ds._take_rows(ids[:1000]))
        assert table.num_rows == 1000, table.num_rows
        out["take_cold_ms"] = ms
        # What the first take left resident: Lance's row-id index and caches.
        out["index_rss_bytes"] = current_rss_bytes() - rss_before
        out["index_cache_bytes"] = ds.session().size_bytes() - session_before
        if args.what == "take_warm":
            table, ms = timed(lambda: ds._take_rows(ids[1000:2000]))
            assert table.num_rows == 1000, table.num_rows
            out["take_warm_ms"] = ms
    elif args.what == "scan":
        table, ms = timed(
            lambda: ds.to_table(columns=["id", "val"], filter="val > 990000", with_row_id=True)
        )
        out["scan_ms"], out["scan_rows"] = ms, table.num_rows
    elif args.what == "count":
        rows, ms = timed(ds.count_rows)
        out["count_ms"], out["count_rows"] = ms, rows
    elif args.what == "compact":
        metrics, ms = timed(
            lambda: ds.optimize.compact_files(target_rows_per_fragment=args.fragment_rows)
        )
        out["compact_ms"] = ms
        out["fragments_removed"] = metrics.fragments_removed
    elif args.what != "open":
        sys.exit(f"unknown measurement {args.what!r}")
    out["rss_growth_bytes"] = current_rss_bytes() - rss_start
    out["peak_rss_bytes"] = peak_rss_bytes()
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--dir", required=True)
    p.add_argument("--base", required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--fragment-rows", type=int, required=True)
    p.add_argument("--updates", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--dir", required=True)
    m.add_argument("--what", required=True)
    m.add_argument("--ids")
    m.add_argument("--fragment-rows", type=int, default=1 << 20)
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
