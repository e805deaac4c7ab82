#!/usr/bin/env python3
"""The Lance side of `cargo bench --bench clone` (issue 38).

Lance (PyPI `pylance` 14.x): a dataset of the rows the Rust harness writes (`id`, `val`
uniform in 0..1M, `payload` = "payload-" and the id in 12 digits), cloned shallow (a
manifest naming the source as a base) and deep. Each call prints one JSON object on stdout
and runs in a fresh process. This script installs nothing.

    python benches/lance_clone.py write --dir D --rows N
    python benches/lance_clone.py shallow --dir D --target T
    python benches/lance_clone.py deep --dir D --target T
    python benches/lance_clone.py scan --dir D          # sum(val) of rows with val < 1000
"""

import argparse
import json
import os
import shutil
import time

import lance
import pyarrow.compute as pc
from lance_rows import bench_rows


def bytes_under(path):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def files_under(path):
    return sum(len(files) for _, _, files in os.walk(path))


def write(args):
    shutil.rmtree(args.dir, ignore_errors=True)
    begun = time.perf_counter()
    lance.write_dataset(bench_rows(args.rows), args.dir, max_rows_per_file=1 << 20)
    print(json.dumps({"seconds": time.perf_counter() - begun, "bytes": bytes_under(args.dir)}))


def clone(args, deep):
    shutil.rmtree(args.target, ignore_errors=True)
    ds = lance.dataset(args.dir)
    begun = time.perf_counter()
    if deep:
        ds.deep_clone(args.target, ds.version)
    else:
        ds.shallow_clone(args.target, ds.version)
    seconds = time.perf_counter() - begun
    print(
        json.dumps(
            {
                "seconds": seconds,
                "bytes": bytes_under(args.target),
                "files": files_under(args.target),
            }
        )
    )


def scan(args):
    ds = lance.dataset(args.dir)
    begun = time.perf_counter()
    table = ds.to_table(columns=["val"], filter="val < 1000")
    total = pc.sum(table.column("val")).as_py()
    print(json.dumps({"seconds": time.perf_counter() - begun, "sum": total}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["write", "shallow", "deep", "scan"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--target")
    parser.add_argument("--rows", type=int, default=0)
    args = parser.parse_args()
    if args.command == "write":
        write(args)
    elif args.command == "scan":
        scan(args)
    else:
        clone(args, deep=args.command == "deep")


if __name__ == "__main__":
    main()
