//! How the CLI runs SQL: datafusion-cli's printing and meta commands, with every statement
//! first offered to natal's entry point (`natal::datafusion::rewrite`), which DataFusion's
//! own REPL and file runner give no way to reach. Text natal leaves alone reaches
//! datafusion-cli exactly as typed.

use std::io::BufRead;
use std::sync::Arc;

use datafusion::common::instant::Instant;

use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use datafusion_cli::command::{Command, OutputFormat};
use datafusion_cli::exec;
use datafusion_cli::helper::CliHelper;
use datafusion_cli::print_options::PrintOptions;
use rustyline::error::ReadlineError;
use rustyline::Editor;

/// Runs SQL text (one or more statements) and prints each result as datafusion-cli does.
pub(crate) async fn sql(ctx: &SessionContext, text: String, print: &PrintOptions) -> Result<()> {
    let state = ctx.state();
    // Text that does not parse goes on as typed: datafusion-cli reports the error, unless
    // natal has more to say (a `Plan` error: an ALTER naming a nested field).
    let mut statements = match natal::datafusion::parse(&state, &text) {
        Ok(statements) => statements,
        Err(e @ DataFusionError::Plan(_)) => return Err(e),
        Err(_) => return exec::exec_from_commands(ctx, vec![text], print).await,
    };
    let mut natal_runs = false;
    for statement in &mut statements {
        natal_runs |= natal::datafusion::is_natal_statement(statement)
            | natal::datafusion::rewrite(statement);
    }
    if !natal_runs {
        return exec::exec_from_commands(ctx, vec![text], print).await;
    }
    for statement in statements {
        if natal::datafusion::is_natal_statement(&statement) {
            natal_statement(ctx, statement, print).await?;
        } else {
            exec::exec_from_commands(ctx, vec![statement.to_string()], print).await?;
        }
    }
    Ok(())
}

/// Runs one of natal's own statements and prints its result as datafusion-cli would.
async fn natal_statement(
    ctx: &SessionContext,
    statement: datafusion::sql::parser::Statement,
    print: &PrintOptions,
) -> Result<()> {
    let started = Instant::now();
    let frame = natal::datafusion::run_statement(ctx, statement).await?;
    let schema = Arc::new(frame.schema().as_arrow().clone());
    let batches = frame.collect().await?;
    let rows = batches.iter().map(|b| b.num_rows()).sum();
    // A statement with no result (ALTER) prints nothing with -q, as DDL does.
    if schema.fields().is_empty() && print.quiet {
        return Ok(());
    }
    let format = ctx.state().config_options().format.clone();
    print.print_batches(schema, &batches, started, rows, &format)
}

/// Runs a SQL file as datafusion-cli does: lines starting `--` or `#!` skipped, a statement
/// ends with a line ending in `;`, a failed statement is reported and the next one runs;
/// only a failure of the last, unterminated statement fails the run.
pub(crate) async fn file(ctx: &SessionContext, path: &str, print: &PrintOptions) -> Result<()> {
    let opened = std::fs::File::open(path)
        .map_err(|e| DataFusionError::Plan(format!("cannot read SQL file '{path}': {e}")))?;
    let mut statement = String::new();
    for line in std::io::BufReader::new(opened).lines() {
        let line =
            line.map_err(|e| DataFusionError::Plan(format!("cannot read SQL file '{path}': {e}")))?;
        if line.starts_with("--") || line.starts_with("#!") {
            continue;
        }
        let line = line.trim_end();
        statement.push_str(line);
        if line.ends_with(';') {
            if let Err(e) = sql(ctx, std::mem::take(&mut statement), print).await {
                eprintln!("{e}");
            }
        } else {
            statement.push('\n');
        }
    }
    if statement.contains(|c| c != '\n') {
        sql(ctx, statement, print).await?;
    }
    Ok(())
}

/// The interactive loop: datafusion-cli's line editor, history (`.history`) and `\`
/// commands, statements run by [`sql`], Ctrl-C stopping the running statement.
pub(crate) async fn repl(ctx: &SessionContext, print: &mut PrintOptions) -> rustyline::Result<()> {
    let dialect = || ctx.state().config_options().sql_parser.dialect;
    let mut editor = Editor::new()?;
    editor.set_helper(Some(CliHelper::new(&dialect(), print.color)));
    editor.load_history(".history").ok();
    loop {
        match editor.readline("> ") {
            Ok(line) if line.starts_with('\\') => {
                editor.add_history_entry(line.trim_end())?;
                if meta_command(ctx, &line, print).await.is_break() {
                    break;
                }
            }
            Ok(line) => {
                editor.add_history_entry(line.trim_end())?;
                tokio::select! {
                    result = sql(ctx, line, print) => {
                        if let Err(e) = result {
                            eprintln!("{e}");
                        }
                    }
                    _ = tokio::signal::ctrl_c() => println!("^C"),
                }
                // `SET datafusion.sql_parser.dialect` may have changed it.
                if let Some(helper) = editor.helper_mut() {
                    helper.set_dialect(&dialect());
                }
            }
            Err(ReadlineError::Interrupted) => {
                println!("^C");
                if let Some(helper) = editor.helper() {
                    helper.reset_hint();
                }
            }
            Err(ReadlineError::Eof) => {
                println!("\\q");
                break;
            }
            Err(e) => {
                eprintln!("cannot read the line: {e}");
                break;
            }
        }
    }
    editor.save_history(".history")
}

/// Runs a `\` command (`\q`, `\d`, `\pset`, ...); breaks on `\q`.
async fn meta_command(
    ctx: &SessionContext,
    line: &str,
    print: &mut PrintOptions,
) -> std::ops::ControlFlow<()> {
    let words = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let not_valid =
        || eprintln!("'{line}' is not a valid command, you can use '\\?' to see all commands");
    let Ok(command) = words[1..].parse::<Command>() else {
        not_valid();
        return std::ops::ControlFlow::Continue(());
    };
    match command {
        Command::Quit => return std::ops::ControlFlow::Break(()),
        Command::OutputFormat(None) => println!("Output format is {:?}.", print.format),
        Command::OutputFormat(Some(format)) => match format.parse::<OutputFormat>() {
            Ok(format) => {
                if let Err(e) = format.execute(print) {
                    eprintln!("{e}");
                }
            }
            Err(_) => not_valid(),
        },
        command => {
            if let Err(e) = command.execute(ctx, print).await {
                eprintln!("{e}");
            }
        }
    }
    std::ops::ControlFlow::Continue(())
}
