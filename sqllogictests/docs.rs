//! The user documentation's examples, run: every fenced `sql` block of `README.md` and
//! `docs/**/*.md`, page by page, and every relative link checked.
//!
//! A page's `sql` blocks run in order in one session (natal registered over a fresh
//! warehouse, the working directory a fresh directory, so `COPY ... TO 'x.parquet'` then
//! `FROM 'x.parquet'` works as pasted into the CLI). Statements end with `;` at a line's end.
//! A `text` block right after a `sql` block is the last statement's output as the CLI prints
//! it (DataFusion's pretty table, nulls as the session formats them); after a `sql error`
//! block, a part of its last statement's error. `sql no-run` blocks are only shown. A
//! `rust` block must appear verbatim in a program under `examples/`, which CI builds.
//!
//! `NATAL_DOCS_BLESS=1` writes each `text` block anew from what its `sql` block printed.

use std::path::{Path, PathBuf};

use datafusion::arrow::util::pretty::pretty_format_batches_with_options;
use datafusion::prelude::SessionContext;

/// One fenced block of a page.
#[derive(Debug)]
struct Block {
    /// Its info string's words (`sql`, `sql error`, `text`, ...).
    info: Vec<String>,
    /// The page line of its first content line (1-based).
    line: usize,
    /// The page lines it spans, fences excluded.
    lines: std::ops::Range<usize>,
    text: String,
}

impl Block {
    fn is(&self, word: &str) -> bool {
        self.info.first().is_some_and(|w| w == word)
    }

    fn has(&self, flag: &str) -> bool {
        self.info.iter().skip(1).any(|w| w == flag)
    }
}

fn blocks(page: &str) -> Vec<Block> {
    let lines: Vec<&str> = page.lines().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let Some(info) = lines[at].trim_start().strip_prefix("```") else {
            at += 1;
            continue;
        };
        let info: Vec<String> = info
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        let start = at + 1;
        let mut end = start;
        while end < lines.len() && !lines[end].trim_start().starts_with("```") {
            end += 1;
        }
        out.push(Block {
            info,
            line: start + 1,
            lines: start..end,
            text: lines[start..end].join("\n"),
        });
        at = end + 1;
    }
    out
}

/// Every page the examples and links of which are checked.
pub fn pages() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// The relative links of `page` whose target does not exist, as `line: target`.
fn dead_links(page: &Path, text: &str) -> Vec<String> {
    let dir = page.parent().unwrap_or(Path::new("."));
    let mut dead = Vec::new();
    let mut in_code = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find("](") {
            rest = &rest[open + 2..];
            let Some(close) = rest.find(')') else {
                break;
            };
            let target = &rest[..close];
            rest = &rest[close..];
            let path = target.split('#').next().unwrap_or_default();
            let external = target.contains("://") || target.starts_with("mailto:");
            if external || path.is_empty() {
                continue;
            }
            if !dir.join(path).exists() {
                dead.push(format!("{}: {target}", number + 1));
            }
        }
    }
    dead
}

/// The statements of a `sql` block: each ends with `;` at the end of a line.
fn statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in sql.lines() {
        if line.trim_start().starts_with("--") && current.trim().is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if line.trim_end().ends_with(';') {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

/// What `sql` prints in the CLI, or its error.
async fn printed(ctx: &SessionContext, sql: &str) -> Result<String, String> {
    let run = async {
        let frame = natal::datafusion::sql(ctx, sql).await?;
        let batches = frame.collect().await?;
        let state = ctx.state();
        let options: datafusion::arrow::util::display::FormatOptions =
            (&state.config_options().format).try_into()?;
        Ok::<_, datafusion::error::DataFusionError>(
            pretty_format_batches_with_options(&batches, &options)?.to_string(),
        )
    };
    run.await.map_err(|e| e.to_string())
}

fn same_output(expected: &str, found: &str) -> bool {
    let lines = |s: &str| -> Vec<String> {
        (s.lines().map(|l| l.trim_end().to_string()))
            .filter(|l| !l.is_empty())
            .collect()
    };
    lines(expected) == lines(found)
}

/// Runs `page`'s examples and checks its links: each failure as `page:line: what`. With
/// `bless`, rewrites the page's `text` blocks from what ran.
async fn check_page(page: &Path, examples: &str, bless: bool) -> (usize, Vec<String>) {
    let name = page
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(page)
        .display()
        .to_string();
    let Ok(text) = std::fs::read_to_string(page) else {
        return (0, vec![format!("{name}: cannot be read")]);
    };
    let mut failures: Vec<String> = (dead_links(page, &text).into_iter())
        .map(|l| format!("{name}:{l}: dead link"))
        .collect();
    let blocks = blocks(&text);
    let normalize =
        |s: &str| -> String { s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n") };
    let examples = normalize(examples);
    for block in blocks.iter().filter(|b| b.is("rust")) {
        if !examples.contains(&normalize(&block.text)) {
            failures.push(format!(
                "{name}:{}: rust block is in no examples/ program",
                block.line
            ));
        }
    }
    let sql: Vec<usize> = (0..blocks.len())
        .filter(|&i| blocks[i].is("sql") && !blocks[i].has("no-run"))
        .collect();
    if sql.is_empty() {
        return (0, failures);
    }
    let work = tempfile::tempdir().expect("temp dir");
    let warehouse = work.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("warehouse");
    let ctx = match super::session(&warehouse.to_string_lossy(), true) {
        Ok(natal) => natal.ctx,
        Err(e) => return (0, vec![format!("{name}: no session: {e}")]),
    };
    let previous = std::env::current_dir().ok();
    std::env::set_current_dir(work.path()).expect("enter the work directory");
    let mut blessed: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut run = 0;
    for &i in &sql {
        let block = &blocks[i];
        let expected =
            (blocks.get(i + 1)).filter(|b| b.is("text") && blocks_adjacent(&text, block, b));
        let wants_error = block.has("error");
        let statements = statements(&block.text);
        let Some((last, before)) = statements.split_last() else {
            continue;
        };
        run += 1;
        let mut failed = false;
        for statement in before {
            if let Err(e) = printed(&ctx, statement).await {
                failures.push(format!("{name}:{}: {}: {e}", block.line, statement.trim()));
                failed = true;
                break;
            }
        }
        if failed {
            continue;
        }
        let outcome = printed(&ctx, last).await;
        match (outcome, wants_error) {
            (Ok(found), false) => {
                if let Some(expected) = expected {
                    if bless {
                        blessed.push((expected.lines.clone(), found));
                    } else if !same_output(&expected.text, &found) {
                        failures.push(format!(
                            "{name}:{}: {} printed\n{found}\nnot\n{}",
                            expected.line,
                            last.trim(),
                            expected.text
                        ));
                    }
                }
            }
            (Err(e), true) => {
                if let Some(expected) = expected.filter(|x| !e.contains(x.text.trim())) {
                    failures.push(format!(
                        "{name}:{}: the error of {} is\n{e}\nnot\n{}",
                        expected.line,
                        last.trim(),
                        expected.text
                    ));
                }
            }
            (Ok(_), true) => failures.push(format!(
                "{name}:{}: {} was to fail, and ran",
                block.line,
                last.trim()
            )),
            (Err(e), false) => {
                failures.push(format!("{name}:{}: {}: {e}", block.line, last.trim()));
            }
        }
    }
    if let Some(previous) = previous {
        let _ = std::env::set_current_dir(previous);
    }
    if bless && !blessed.is_empty() {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        for (range, found) in blessed.into_iter().rev() {
            let new: Vec<String> = found.lines().map(str::to_string).collect();
            lines.splice(range, new);
        }
        let mut out = lines.join("\n");
        out.push('\n');
        std::fs::write(page, out).expect("bless the page");
    }
    (run, failures)
}

/// Whether only blank lines lie between `sql`'s closing fence and `text`'s opening one.
fn blocks_adjacent(page: &str, sql: &Block, text: &Block) -> bool {
    let lines: Vec<&str> = page.lines().collect();
    let between = (sql.lines.end + 1)..(text.lines.start - 1);
    between
        .into_iter()
        .all(|i| lines.get(i).is_some_and(|l| l.trim().is_empty()))
}

/// Every program under `examples/`, one after another.
fn example_programs() -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut text = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return text;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        text.push_str(&std::fs::read_to_string(path).unwrap_or_default());
        text.push('\n');
    }
    text
}

/// Checks every page: `(pages passed, pages failed)`, each failure printed.
pub async fn check(filter: Option<&str>) -> (usize, usize) {
    let bless = std::env::var("NATAL_DOCS_BLESS").is_ok_and(|v| v == "1");
    let examples = example_programs();
    let (mut passed, mut failed) = (0, 0);
    for page in pages() {
        let shown = page.display().to_string();
        if filter.is_some_and(|f| !shown.contains(f)) {
            continue;
        }
        let (run, failures) = check_page(&page, &examples, bless).await;
        let name = (page.strip_prefix(env!("CARGO_MANIFEST_DIR")))
            .unwrap_or(&page)
            .display();
        if failures.is_empty() {
            println!("ok   docs {name} ({run} examples)");
            passed += 1;
        } else {
            println!("FAIL docs {name}\n{}", failures.join("\n"));
            failed += 1;
        }
    }
    (passed, failed)
}

/// The checker catches what it is for: a page whose example prints other than it says,
/// whose failing example runs, and whose link is dead, each reported with its line.
pub async fn self_check() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let page = dir.path().join("page.md");
    let text = "# A page\n\nSee [there](missing.md) and [here](page.md).\n\n\
        ```sql\nCREATE TABLE t (a INT);\nINSERT INTO t VALUES (1);\nSELECT a FROM t;\n```\n\n\
        ```text\n+---+\n| a |\n+---+\n| 2 |\n+---+\n```\n\n\
        ```sql error\nSELECT a FROM t;\n```\n";
    std::fs::write(&page, text).map_err(|e| e.to_string())?;
    let (run, failures) = check_page(&page, "", false).await;
    let reported = |what: &str| failures.iter().any(|f| f.contains(what));
    let caught = run == 2
        && failures.len() == 3
        && reported("page.md:3: missing.md: dead link")
        && reported("page.md:12: SELECT a FROM t; printed")
        && reported("page.md:20: SELECT a FROM t; was to fail");
    caught.then_some(()).ok_or_else(|| failures.join("\n"))
}
