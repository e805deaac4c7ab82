//! The progress bar the CLI draws for natal's long operations.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{HumanCount, ProgressBar, ProgressDrawTarget, ProgressStyle};
use natal::Progress;

/// A progress bar on stderr (drawn by indicatif) for an operation that runs longer than
/// half a second: rows (or files) done of the total when known, the rate and the time
/// taken; cleared when the operation ends. Installed only for a terminal without `-q`.
#[derive(Default)]
pub(crate) struct TerminalProgress {
    /// When the running operation started, and its bar once drawn.
    state: Mutex<Option<(Instant, Option<ProgressBar>)>>,
}

/// The unit `operation` counts in.
fn unit(operation: &str) -> &'static str {
    match operation {
        "cleaning up" => "files",
        "cloning" => "bytes",
        _ => "rows",
    }
}

/// The bar of `operation`, showing `total` when it is known; the rate is natal's own (rows
/// since the operation began), set as the message.
fn bar(operation: &'static str, total: Option<u64>, done: u64, since: Duration) -> ProgressBar {
    let unit = unit(operation);
    let template = match (total, unit) {
        (Some(_), "bytes") => {
            format!("{operation} {{bar:20}} {{bytes}}/{{total_bytes}} {{elapsed}}")
        }
        (Some(_), _) => {
            format!("{operation} {{bar:20}} {{human_pos}}/{{human_len}} {unit} {{msg}} {{elapsed}}")
        }
        (None, _) => format!("{{spinner}} {operation} {{human_pos}} {unit} {{msg}} {{elapsed}}"),
    };
    let style =
        ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr())
        .with_style(style)
        .with_position(done)
        .with_elapsed(since)
}

impl Progress for TerminalProgress {
    fn update(&self, operation: &'static str, rows_done: u64, rows_total: Option<u64>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let now = Instant::now();
        let (started, drawn) = state.get_or_insert((now, None));
        if drawn.is_none() && now.duration_since(*started) < Duration::from_millis(500) {
            return;
        }
        let since = now.duration_since(*started);
        let bar = drawn.get_or_insert_with(|| bar(operation, rows_total, rows_done, since));
        if let Some(total) = rows_total {
            bar.set_length(total);
        }
        bar.set_position(rows_done);
        let rate = rows_done as f64 / since.as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "({} {}/s)",
            HumanCount(rate as u64),
            unit(operation)
        ));
    }

    fn finish(&self, _operation: &'static str) {
        if let Ok(mut state) = self.state.lock() {
            if let Some((_, Some(bar))) = state.take() {
                bar.finish_and_clear();
            }
        }
    }
}
