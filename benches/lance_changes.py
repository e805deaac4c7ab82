#!/usr/bin/env python3
"""The Lance side of `cargo bench --bench changes` (issue 40).

Lance (PyPI `pylance` 14.x, stable row ids on): a dataset of the rows the Rust harness writes
(`id`, `val` uniform in 0..1M, `payload` = "payload-" and the id in 12 digits), edited in the
same rounds (each an update of 0.1% of the rows and a delete of 0.01%), then its change
between two versions read with `delta()`: inserted rows, updated rows (their new values)
and deleted row ids. Each call prints one JSON object on stdout and runs in a fresh process.
This script installs nothing.

    python benches/lance_changes.py write --dir D --rows N
    python benches/lance_changes.py edit --dir D --rows N --rounds R --pattern scattered|clustered
    python benches/lance_changes.py delta --dir D --from V
"""

import argparse
import json
import shutil
import time

import lance
from lance_rows import bench_rows


def read_chars():
    """Bytes this process has read through system calls (page cache hits included)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def write(args):
    shutil.rmtree(args.dir, ignore_errors=True)
    begun = time.perf_counter()
    ds = lance.write_dataset(
        bench_rows(args.rows), args.dir, max_rows_per_file=1 << 20, enable_stable_row_ids=True
    )
    print(json.dumps({"seconds": time.perf_counter() - begun, "version": ds.version}))


def predicates(pattern, rows, round_no):
    """The rows round `round_no` updates and deletes (the Rust harness's own)."""
    if pattern == "scattered":
        return f"id % 1000 = {round_no}", f"id % 10000 = {5500 + round_no}"
    block = rows // 10 * round_no
    update = f"id >= {block} AND id < {block + rows // 1000}"
    start = block + rows // 20
    return update, f"id >= {start} AND id < {start + rows // 10000}"


def edit(args):
    ds = lance.dataset(args.dir)
    before = ds.version
    begun = time.perf_counter()
    for round_no in range(args.rounds):
        update, delete = predicates(args.pattern, args.rows, round_no)
        ds.update({"val": "val + 1"}, where=update)
        ds.delete(delete)
    ds = lance.dataset(args.dir)
    print(
        json.dumps(
            {"seconds": time.perf_counter() - begun, "from": before, "to": ds.version}
        )
    )


def delta(args):
    ds = lance.dataset(args.dir)
    chars = read_chars()
    begun = time.perf_counter()
    d = ds.delta(compared_against=args.from_version)
    inserted = d.get_inserted_rows().read_all().num_rows
    updated = d.get_updated_rows().read_all().num_rows
    deleted = d.get_deleted_row_ids().read_all().num_rows
    seconds = time.perf_counter() - begun
    print(
        json.dumps(
            {
                "seconds": seconds,
                "inserted": inserted,
                "updated": updated,
                "deleted": deleted,
                "bytes": read_chars() - chars,
            }
        )
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["write", "edit", "delta"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pattern", default="scattered")
    parser.add_argument("--from", dest="from_version", type=int, default=1)
    args = parser.parse_args()
    {"write": write, "edit": edit, "delta": delta}[args.command](args)


if __name__ == "__main__":
    main()
