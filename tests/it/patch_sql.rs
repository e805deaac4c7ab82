//! SQL choosing row patches (issue 63): an `UPDATE` or `MERGE` of columns within the
//! patch share writes patches (`EXPLAIN` says so), the table's share chooses unless the
//! session sets one, and a `MERGE` writes its updates as patches beside its deletes and
//! inserts in one version. On the table of `row_patch.rs`.

use crate::common::{answer, run};
use crate::row_patch::{lines, table};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_of_a_small_share_of_the_row_writes_patches() {
    let (_dir, ctx, table) = table().await;
    for sql in [
        "ALTER TABLE t ADD COLUMN doc VARCHAR",
        "UPDATE t SET doc = repeat(md5(CAST(k AS VARCHAR)), 7) WHERE k >= 0",
    ] {
        answer(&ctx, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let rows = "SELECT k, val, name, _rowaddr FROM \"t$rows\" WHERE k IN (1, 2, 150) ORDER BY k";
    let before = lines(&ctx, rows).await;
    let addrs_before: Vec<String> = before
        .iter()
        .map(|l| l.split(' ').nth(7).unwrap().into())
        .collect();
    let explain = |sql: &str| format!("EXPLAIN {sql}");
    let update = "UPDATE t SET val = val + 1000, name = 'p' WHERE k % 2 = 0";
    // A share of 0 rewrites; a larger one than the assigned columns hold patches.
    lines(&ctx, "SET natal.patch_max_share = 0").await;
    let plan = lines(&ctx, &explain(update)).await.join("\n");
    assert!(plan.contains("assignments as rewrite"), "{plan}");
    lines(&ctx, "SET natal.patch_max_share = 0.5").await;
    let plan = lines(&ctx, &explain(update)).await.join("\n");
    assert!(plan.contains("2 assignments as row patches"), "{plan}");
    // The wide column is most of the row's bytes: rewritten.
    let wide = "UPDATE t SET doc = 'short' WHERE k = 1";
    let plan = lines(&ctx, &explain(wide)).await.join("\n");
    assert!(plan.contains("as rewrite"), "{plan}");

    let relocations = "SELECT count(*) FROM \"t$relocations\"";
    let entries = lines(&ctx, relocations).await;
    assert_eq!(lines(&ctx, update).await, ["| 100 |"]);
    let after = lines(&ctx, rows).await;
    let addrs_after: Vec<String> = after
        .iter()
        .map(|l| l.split(' ').nth(7).unwrap().into())
        .collect();
    assert_eq!(
        addrs_after, addrs_before,
        "patched rows stay where they are"
    );
    assert_eq!(
        after[0].split(' ').take(6).collect::<Vec<_>>().join(" "),
        "| 1 | 1 | n1"
    );
    assert_eq!(
        after[1].split(' ').take(6).collect::<Vec<_>>().join(" "),
        "| 2 | 1002 | p"
    );
    assert_eq!(
        after[2].split(' ').take(6).collect::<Vec<_>>().join(" "),
        "| 150 | 1150 | p"
    );
    let latest = table.latest().await.unwrap();
    assert!(crate::common::patched_fragments(&latest) > 0);
    assert_eq!(
        lines(&ctx, relocations).await,
        entries,
        "no relocation entry"
    );
    // A NOT NULL column given a null: refused, nothing written.
    let version = latest.version();
    let error = answer(&ctx, "UPDATE t SET k = NULL WHERE k = 4")
        .await
        .unwrap_err();
    assert!(error.to_string().to_lowercase().contains("null"), "{error}");
    assert_eq!(table.latest().await.unwrap().version(), version);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tables_patch_share_chooses_unless_the_session_sets_one() {
    let (_dir, ctx, table) = table().await;
    let explain = "EXPLAIN UPDATE t SET val = 7 WHERE k = 3";
    let how = |plan: Vec<String>| {
        let plan = plan.join("\n");
        match (plan.contains("as row patches"), plan.contains("as rewrite")) {
            (true, false) => "patches",
            (false, true) => "rewrite",
            _ => panic!("{plan}"),
        }
    };
    let share = "SELECT patch_max_share FROM \"t$versions\" ORDER BY version DESC LIMIT 1";
    assert_eq!(lines(&ctx, share).await, ["| |"]);
    assert_eq!(how(lines(&ctx, explain).await), "rewrite");
    let set = "ALTER TABLE t SET TBLPROPERTIES ('patch_max_share' = '0.5')";
    answer(&ctx, set).await.unwrap();
    assert_eq!(lines(&ctx, share).await, ["| 0.5 |"]);
    assert_eq!(table.latest().await.unwrap().patch_max_share(), 0.5);
    assert_eq!(how(lines(&ctx, explain).await), "patches");
    // The session's option, when set, decides for every table.
    run(&ctx, "SET natal.patch_max_share = 0").await;
    assert_eq!(how(lines(&ctx, explain).await), "rewrite");
    answer(&ctx, "RESET natal.patch_max_share").await.unwrap();
    assert_eq!(how(lines(&ctx, explain).await), "patches");
    let error = answer(&ctx, "RESET natal.no_such_option")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no_such_option"), "{error}");
    // A share out of range, or not a number: refused, no version written.
    let version = table.latest().await.unwrap().version();
    for bad in ["'1.5'", "'-0.1'", "'half'"] {
        let sql = format!("ALTER TABLE t SET TBLPROPERTIES ('patch_max_share' = {bad})");
        let error = answer(&ctx, &sql).await.unwrap_err().to_string();
        assert!(error.contains("patch_max_share"), "{error}");
    }
    let error = (table.set_patch_max_share(Some(f64::NAN)).await).unwrap_err();
    assert!(matches!(error, natal::Error::InvalidInput(_)), "{error}");
    assert_eq!(table.latest().await.unwrap().version(), version);
    // `default` clears it: natal's default decides again.
    let set = "ALTER TABLE t SET TBLPROPERTIES ('patch_max_share' = 'default')";
    answer(&ctx, set).await.unwrap();
    assert_eq!(lines(&ctx, share).await, ["| |"]);
    assert_eq!(how(lines(&ctx, explain).await), "rewrite");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_that_only_updates_writes_patches() {
    let (_dir, ctx, table) = table().await;
    // `name` is most of these narrow rows' bytes.
    let set = "ALTER TABLE t SET TBLPROPERTIES ('patch_max_share' = '0.9')";
    answer(&ctx, set).await.unwrap();
    let merge =
        "MERGE INTO t USING (VALUES (1, 'm1'), (150, 'm150'), (999, 'none')) AS s(k, name) \
                 ON t.k = s.k WHEN MATCHED THEN UPDATE SET name = s.name";
    let plan = lines(&ctx, &format!("EXPLAIN {merge}")).await.join("\n");
    assert!(plan.contains("updates as row patches"), "{plan}");
    let rows = "SELECT k, name, _rowaddr FROM \"t$rows\" WHERE k IN (1, 150) ORDER BY k";
    let addrs = |lines: Vec<String>| -> Vec<String> {
        lines
            .iter()
            .map(|l| l.split(' ').nth(5).unwrap().into())
            .collect()
    };
    let before = addrs(lines(&ctx, rows).await);
    assert_eq!(lines(&ctx, merge).await, ["| 2 |"]);
    let after = lines(&ctx, rows).await;
    assert_eq!(
        addrs(after.clone()),
        before,
        "patched rows stay where they are"
    );
    assert!(after[0].starts_with("| 1 | m1 |") && after[1].starts_with("| 150 | m150 |"));
    let patches = "SELECT sum(patches), sum(patched_rows) FROM t$fragments";
    assert_eq!(lines(&ctx, patches).await, ["| 2 | 2 |"]);
    assert_eq!(
        lines(&ctx, "SELECT count(*) FROM \"t$relocations\"").await,
        ["| 0 |"]
    );
    // A row two source rows match: an error, nothing written.
    let version = table.latest().await.unwrap().version();
    let twice = "MERGE INTO t USING (VALUES (2, 'a'), (2, 'b')) AS s(k, name) ON t.k = s.k \
                 WHEN MATCHED THEN UPDATE SET name = s.name";
    answer(&ctx, twice).await.unwrap_err();
    assert_eq!(table.latest().await.unwrap().version(), version);
    // A MERGE that also inserts patches its updates and appends its inserts, in one
    // version; one that also deletes writes its deletes beside them.
    let upsert = "MERGE INTO t USING (VALUES (3, 'x'), (500, 'y')) AS s(k, name) ON t.k = s.k \
                  WHEN MATCHED THEN UPDATE SET name = s.name \
                  WHEN NOT MATCHED THEN INSERT (k, val, name) VALUES (s.k, 0, s.name)";
    let plan = lines(&ctx, &format!("EXPLAIN {upsert}")).await.join("\n");
    assert!(plan.contains("updates as row patches"), "{plan}");
    let version = table.latest().await.unwrap().version();
    assert_eq!(lines(&ctx, upsert).await, ["| 2 |"]);
    assert_eq!(table.latest().await.unwrap().version(), version + 1);
    assert_eq!(lines(&ctx, patches).await, ["| 3 | 3 |"]);
    let deleting = "MERGE INTO t USING (VALUES (4, 'd'), (6, 'e'), (501, 'z')) AS s(k, name) \
                    ON t.k = s.k \
                    WHEN MATCHED AND s.name = 'd' THEN DELETE \
                    WHEN MATCHED THEN UPDATE SET name = s.name \
                    WHEN NOT MATCHED THEN INSERT (k, val, name) VALUES (s.k, 0, s.name)";
    let plan = lines(&ctx, &format!("EXPLAIN {deleting}")).await.join("\n");
    assert!(plan.contains("updates as row patches"), "{plan}");
    let six = "SELECT _rowid, _rowaddr FROM \"t$rows\" WHERE k = 6";
    let six_before = lines(&ctx, six).await;
    let version = table.latest().await.unwrap().version();
    assert_eq!(lines(&ctx, deleting).await, ["| 3 |"]);
    assert_eq!(table.latest().await.unwrap().version(), version + 1);
    assert_eq!(lines(&ctx, six).await, six_before, "the updated row stays");
    assert_eq!(lines(&ctx, patches).await, ["| 4 | 4 |"]);
    assert_eq!(
        lines(
            &ctx,
            "SELECT k, name FROM t WHERE k IN (1, 3, 4, 6, 150, 500, 501) ORDER BY k"
        )
        .await,
        [
            "| 1 | m1 |",
            "| 3 | x |",
            "| 6 | e |",
            "| 150 | m150 |",
            "| 500 | y |",
            "| 501 | z |"
        ]
    );
    // The version reads as one change of each kind.
    let changes = format!(
        "SELECT k, name, _change_type FROM natal_changes('t', {version}) ORDER BY k, _change_type"
    );
    assert_eq!(
        lines(&ctx, &changes).await,
        [
            "| 4 | n4 | delete |",
            "| 6 | e | update_postimage |",
            "| 6 | n6 | update_preimage |",
            "| 501 | z | insert |"
        ]
    );
}
