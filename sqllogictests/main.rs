//! Runs every `.slt` file in `sqllogictests/` against a fresh DataFusion session with natal
//! registered over a temporary directory (`$ROOT` in the files, with
//! `control substitution on`), then the examples of the user documentation (`docs.rs`).

mod docs;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::DataFusionError;
use datafusion::prelude::{SessionConfig, SessionContext};
use sqllogictest::{DBOutput, DefaultColumnType};

struct Natal {
    ctx: SessionContext,
    /// False: the same session without natal's statements (DataFusion's own tables), for
    /// [`compare_with_datafusion`].
    natal: bool,
}

#[async_trait]
impl sqllogictest::AsyncDB for Natal {
    type Error = DataFusionError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        let frame = match self.natal {
            true => natal::datafusion::sql(&self.ctx, sql).await?,
            false => self.ctx.sql(sql).await?,
        };
        let columns = frame.schema().fields().len();
        let explain = frame
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .eq(["plan_type", "plan"]);
        let batches = frame.collect().await?;
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        for batch in &batches {
            let formatters = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<Result<Vec<_>, _>>()?;
            for row in 0..batch.num_rows() {
                let cells: Vec<String> = formatters
                    .iter()
                    .map(|f| f.value(row).to_string())
                    .collect();
                if explain {
                    rows.extend(explain_rows(&cells));
                } else {
                    rows.push(cells);
                }
            }
        }
        Ok(DBOutput::Rows {
            types: vec![DefaultColumnType::Any; columns],
            rows,
        })
    }

    async fn shutdown(&mut self) {}
}

/// DataFusion's own convention for plans in `.slt` files: the plan type on a line of its
/// own, then one numbered line per plan line, indentation drawn with dashes.
fn explain_rows(cells: &[String]) -> Vec<Vec<String>> {
    let mut rows = vec![vec![cells[0].clone()]];
    for (i, line) in cells[1].lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = "-".repeat(line.len() - trimmed.len());
        rows.push(vec![format!("{:02}){indent}{trimmed}", i + 1)]);
    }
    rows
}

fn slt_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sqllogictests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "slt"));
    files.sort();
    files
}

/// A session as the natal CLI has it, natal's catalog over `root` when `natal`.
fn session(root: &str, natal: bool) -> Result<Natal, DataFusionError> {
    // Fixed partitioning, so plans read the same on any machine.
    let config = SessionConfig::new()
        .with_target_partitions(4)
        .with_information_schema(true); // as the natal CLI has it
                                        // Files by path, as the natal CLI (and datafusion-cli) reads them.
    let ctx = SessionContext::new_with_config(config).enable_url_table();
    if natal {
        natal::datafusion::register(&ctx, root)?;
    }
    Ok(Natal { ctx, natal })
}

/// `NATAL_COMPARE_SLT=<dir>`: runs every `.slt` file of `dir` (DataFusion's own, from the
/// `datafusion-sqllogictest` crate's `test_files/`) record by record twice, on natal's tables
/// and on DataFusion's in-memory ones, and prints each record that passes on DataFusion's and
/// fails on natal's. A check run by hand (DataFusion's files need its own harness's tables,
/// which both sides lack alike), not by CI.
async fn compare_with_datafusion(dir: &str, filter: Option<&str>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "slt"));
    files.sort();
    let (mut records, mut differ, mut plans) = (0usize, 0usize, 0usize);
    for file in files {
        let name = file.display().to_string();
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let Ok(parsed) = sqllogictest::parse_file::<DefaultColumnType>(&file) else {
            println!("SKIP {name}: does not parse");
            continue;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_string_lossy().to_string();
        let (natal_root, memory_root) = (root.clone(), root.clone());
        let mut on_natal = sqllogictest::Runner::new(move || {
            let root = natal_root.clone();
            async move { session(&root, true) }
        });
        let mut on_memory = sqllogictest::Runner::new(move || {
            let root = memory_root.clone();
            async move { session(&root, false) }
        });
        on_natal.with_column_validator(|_, _| true);
        on_natal.set_var("ROOT".to_string(), root.clone());
        on_memory.with_column_validator(|_, _| true);
        on_memory.set_var("ROOT".to_string(), root.clone());
        for record in parsed {
            let location = match &record {
                sqllogictest::Record::Statement { loc, .. }
                | sqllogictest::Record::Query { loc, .. } => Some(loc.clone()),
                _ => None,
            };
            let explains = match &record {
                sqllogictest::Record::Query { sql, .. }
                | sqllogictest::Record::Statement { sql, .. } => {
                    sql.trim_start().to_ascii_lowercase().starts_with("explain")
                }
                _ => false,
            };
            let natal = futures_catch(on_natal.run_async(record.clone())).await;
            let memory = futures_catch(on_memory.run_async(record)).await;
            let Some(location) = location else {
                continue;
            };
            records += 1;
            if memory.is_ok() && natal.is_err() {
                // A plan shows natal's scan where DataFusion's shows its own: not a defect.
                if explains {
                    plans += 1;
                    continue;
                }
                differ += 1;
                let error = natal.err().unwrap_or_default();
                let first: String = error.lines().take(6).collect::<Vec<_>>().join(" | ");
                println!("DIFF {location}: {first}");
            }
        }
    }
    println!(
        "compared {records} records: {differ} pass on DataFusion's tables, fail on natal's; \
         {plans} EXPLAIN records show natal's scan in the plan"
    );
}

/// A record's outcome, a panic among the failures (reported as one).
async fn futures_catch<T>(
    run: impl std::future::Future<Output = Result<T, sqllogictest::TestError>>,
) -> Result<(), String> {
    let caught = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(run)).await;
    match caught {
        Ok(outcome) => outcome.map(|_| ()).map_err(|e| e.to_string()),
        Err(_) => Err("PANIC".to_string()),
    }
}

#[tokio::main]
async fn main() {
    if let Ok(dir) = std::env::var("NATAL_COMPARE_SLT") {
        let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
        compare_with_datafusion(&dir, filter.as_deref()).await;
        return;
    }
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let (mut passed, mut failed) = (0, 0);
    for file in slt_files() {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_string_lossy().to_string();
        let ctx_root = root.clone();
        let mut runner = sqllogictest::Runner::new(move || {
            let root = ctx_root.clone();
            async move { session(&root, true) }
        });
        runner.with_column_validator(|_, _| true);
        runner.set_var("ROOT".to_string(), root);
        match runner.run_file_async(&file).await {
            Ok(()) => {
                println!("ok   {name}");
                passed += 1;
            }
            Err(e) => {
                println!("FAIL {name}\n{e}");
                failed += 1;
            }
        }
        let _ = Arc::new(dir);
    }
    // The user documentation's examples and links (`docs.rs`), after the checker's own test.
    if let Err(missed) = docs::self_check().await {
        println!("FAIL the docs checker missed what it is for:\n{missed}");
        failed += 1;
    }
    let (pages_passed, pages_failed) = docs::check(filter.as_deref()).await;
    passed += pages_passed;
    failed += pages_failed;
    println!("sqllogictests: {passed} passed, {failed} failed");
    if failed > 0 || passed == 0 {
        std::process::exit(1);
    }
}
