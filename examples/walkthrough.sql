-- natal's main job, in SQL: create a table, load it, update, delete, compact and
-- time-travel, watching every row keep its _rowid.
--   cargo run --release --bin natal -- --root ./natal-demo -f examples/walkthrough.sql

DROP TABLE IF EXISTS items;

CREATE TABLE items (sku BIGINT NOT NULL, label VARCHAR, price DOUBLE);

INSERT INTO items VALUES (1, 'apple', 0.5), (2, 'bread', 2.25), (3, 'cheese', 7.0);
INSERT INTO items VALUES (4, 'dates', 3.1), (5, 'eggs', 2.9);

-- Each _rowid is its birth address: fragment << 32 | offset.
SELECT sku, label, _rowid, _rowaddr FROM "items$rows" ORDER BY sku;

-- An update keeps the id and moves the row; a delete retires its id.
UPDATE items SET price = 2.5 WHERE sku = 2;
DELETE FROM items WHERE sku = 3;
SELECT sku, label, price, _rowid, _rowaddr FROM "items$rows" ORDER BY sku;

-- Rows are found by id wherever they moved: a mask, not a scan.
EXPLAIN SELECT label FROM "items$rows" WHERE _rowid IN (1, 4294967297);
SELECT label FROM "items$rows" WHERE _rowid IN (1, 4294967297);

-- Compaction rewrites files; ids stay put. The relocation view shows what moved.
SELECT * FROM natal_compact('items');
SELECT sku, label, _rowid, _rowaddr FROM "items$rows" ORDER BY sku;
SELECT * FROM "items$relocations";
SELECT * FROM natal_checkpoint('items');

-- An index stores row ids, so the moves above never invalidate it.
SELECT segment_seq, fragments_indexed, rows_indexed FROM natal_create_index('items', 'label');
EXPLAIN SELECT sku, price FROM items WHERE label = 'dates';
SELECT sku, price FROM items WHERE label = 'dates';
SELECT index_name, column_name, segment_seq, fragment_ids FROM "items$indexes";

-- Change reads: what changed after version 3, each row named by its id. With change data
-- on, updates and deletes also keep the values of the rows they replace, for dense reads.
ALTER TABLE items SET TBLPROPERTIES (change_data_feed = true);
UPDATE items SET price = 0.6 WHERE sku = 1;
SELECT sku, price, _rowid, _change_type, _commit_version
FROM natal_changes('items', 3) ORDER BY _rowid, _change_type DESC;

-- Every version is still readable.
SELECT version, operation, rows_added, rows_removed, live_rows, change_data_rows
FROM "items$versions" ORDER BY version;
SELECT sku, label, price FROM "items@v3" ORDER BY sku;
SELECT fragment_id, physical_rows, deleted_rows, carried FROM "items$fragments";
