#!/usr/bin/env python3
"""The Lance side of `cargo bench --bench patches` (issue 63).

Lance (PyPI `pylance` 14.x): a dataset of the rows the Rust harness writes (`id`, `label` =
"l" and id % 97, `score` = id / 2, `emb` a fixed-size list of float32 drawn uniformly from a
seeded generator, `thumb` random bytes of `--thumb` each as a blob column unless 0), then `update({"label": "'x'"}, where=...)` on a fresh copy of it for each
predicate: the seconds and the bytes the update added. Each call prints one JSON object on
stdout. This script installs nothing.

    python benches/lance_patches.py write --dir D --rows N --dim M [--thumb B]
    python benches/lance_patches.py update --dir D --where PREDICATE
"""

import argparse
import json
import os
import shutil
import time

import lance
import numpy as np
import pyarrow as pa


def bytes_under(path):
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


def batches(rows, dim, thumb):
    rng = np.random.default_rng(7)
    fields = [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("label", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("emb", pa.list_(pa.float32(), dim)),
    ]
    if thumb:
        blob = {"lance-encoding:blob": "true"}
        fields.append(pa.field("thumb", pa.large_binary(), metadata=blob))
    schema = pa.schema(fields)
    start = 0
    while start < rows:
        n = min(10_000, rows - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        floats = rng.random(n * dim, dtype=np.float32)
        columns = [
            pa.array(ids),
            pa.array([f"l{i % 97}" for i in ids]),
            pa.array(ids * 0.5),
            pa.FixedSizeListArray.from_arrays(pa.array(floats), dim),
        ]
        if thumb:
            payload = rng.bytes(n * thumb)
            columns.append(
                pa.array(
                    [payload[i * thumb : (i + 1) * thumb] for i in range(n)],
                    pa.large_binary(),
                )
            )
        yield pa.record_batch(columns, schema=schema)
        start += n


def write(args):
    shutil.rmtree(args.dir, ignore_errors=True)
    reader = pa.RecordBatchReader.from_batches(
        next(batches(1, args.dim, args.thumb)).schema,
        batches(args.rows, args.dim, args.thumb),
    )
    lance.write_dataset(reader, args.dir, max_rows_per_file=25_000)
    print(json.dumps({"bytes": bytes_under(args.dir)}))


def update(args):
    copy = args.dir + ".copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(args.dir, copy)
    before = bytes_under(copy)
    ds = lance.dataset(copy)
    begun = time.perf_counter()
    ds.update({"label": "'x'"}, where=args.where)
    seconds = time.perf_counter() - begun
    written = bytes_under(copy) - before
    shutil.rmtree(copy, ignore_errors=True)
    print(json.dumps({"seconds": seconds, "bytes": written}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["write", "update"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--thumb", type=int, default=0)
    parser.add_argument("--where", default="")
    args = parser.parse_args()
    {"write": write, "update": update}[args.command](args)


if __name__ == "__main__":
    main()
