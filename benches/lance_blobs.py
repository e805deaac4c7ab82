#!/usr/bin/env python3
"""The Lance side of `cargo bench --bench blobs` (issue 35).

Lance (PyPI `pylance` 14.x) with a `blob_field` column holds payloads of the sizes the Rust
harness gives (one size per row, in a file of decimal sizes), random bytes of its own. Each
call prints one JSON object on stdout; every measurement runs in a fresh process. This
script installs nothing: run it with an interpreter that has pylance (README.md says how).

    python benches/lance_blobs.py write --dir D --sizes FILE
    python benches/lance_blobs.py sizes --dir D
    python benches/lance_blobs.py ranges --dir D --requests FILE   # lines "row offset length"
    python benches/lance_blobs.py take --dir D --rows FILE         # lines "row"
    python benches/lance_blobs.py compact --dir D                  # deletes key % 5 = 0 first
    python benches/lance_blobs.py update --dir D                   # SET key = key, key % 5 = 1
"""

import argparse
import json
import os
import shutil
import time

import lance
import numpy as np
import pyarrow as pa
from lance.blob import blob_array, blob_field


def read_lines(path):
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def write(args):
    sizes = [int(line[0]) for line in read_lines(args.sizes)]
    shutil.rmtree(args.dir, ignore_errors=True)
    schema = pa.schema([pa.field("key", pa.int64()), blob_field("img")])
    rng = np.random.default_rng(7)
    batch_rows = 50

    def batches():
        for start in range(0, len(sizes), batch_rows):
            chunk = sizes[start : start + batch_rows]
            payloads = [rng.bytes(n) for n in chunk]
            yield pa.record_batch(
                [pa.array(range(start, start + len(chunk)), pa.int64()), blob_array(payloads)],
                schema=schema,
            )

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    started = time.perf_counter()
    lance.write_dataset(reader, args.dir, schema=schema, data_storage_version="2.2")
    elapsed = time.perf_counter() - started
    print(json.dumps({"seconds": elapsed, "bytes": sum(sizes)}))


def sizes(args):
    ds = lance.dataset(args.dir)
    started = time.perf_counter()
    table = ds.to_table(columns=["key", "img"])
    elapsed = time.perf_counter() - started
    print(json.dumps({"seconds": elapsed, "rows": table.num_rows}))


def ranges(args):
    ds = lance.dataset(args.dir)
    requests = [(int(r), int(o), int(n)) for r, o, n in read_lines(args.requests)]
    started = time.perf_counter()
    got = ds.read_blob_ranges("img", requests, selector="indices")
    elapsed = time.perf_counter() - started
    total = sum(len(b) for _, _, b in got if b is not None)
    print(json.dumps({"seconds": elapsed, "bytes": total}))


def take(args):
    ds = lance.dataset(args.dir)
    rows = [int(line[0]) for line in read_lines(args.rows)]
    started = time.perf_counter()
    files = ds.take_blobs("img", indices=rows)
    total = 0
    for blob in files:
        with blob as f:
            total += len(f.read())
    elapsed = time.perf_counter() - started
    print(json.dumps({"seconds": elapsed, "bytes": total}))


def dir_bytes(path):
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


def compact(args):
    ds = lance.dataset(args.dir)
    ds.delete("key % 5 = 0")
    before = dir_bytes(args.dir)
    started = time.perf_counter()
    ds.optimize.compact_files()
    elapsed = time.perf_counter() - started
    after = dir_bytes(args.dir)
    print(json.dumps({"seconds": elapsed, "written": after - before, "peak": after}))


def update(args):
    """An update of the other column of a fifth of the rows, their blob values unchanged."""
    ds = lance.dataset(args.dir)
    before = dir_bytes(args.dir)
    started = time.perf_counter()
    ds.update({"key": "key"}, where="key % 5 = 1")
    elapsed = time.perf_counter() - started
    after = dir_bytes(args.dir)
    print(json.dumps({"seconds": elapsed, "written": after - before}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["write", "sizes", "ranges", "take", "compact", "update"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--sizes")
    parser.add_argument("--requests")
    parser.add_argument("--rows")
    args = parser.parse_args()
    commands = {
        "write": write,
        "sizes": sizes,
        "ranges": ranges,
        "take": take,
        "compact": compact,
        "update": update,
    }
    commands[args.what](args)


if __name__ == "__main__":
    main()
