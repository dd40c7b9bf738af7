//! Progress bars (indicatif) for the library's [`Progress`] events. They draw on stderr and
//! stay hidden when stderr is not a terminal (CI logs, pipes), so reports stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kernel_lab::progress::Progress;

/// The bar of the task in progress, if any.
#[derive(Default)]
pub struct Bars {
    bar: Option<ProgressBar>,
}

impl Bars {
    /// Draws one event: `Start` opens a bar (a spinner when the total is unknown), `Advance`
    /// moves it, `Finish` clears it.
    pub fn handle(&mut self, event: Progress<'_>) {
        match event {
            Progress::Start { task, total, unit } => {
                if let Some(old) = self.bar.take() {
                    old.finish_and_clear();
                }
                let target = ProgressDrawTarget::stderr();
                let (bar, template) = if total > 0 {
                    let t = format!("{{prefix:>16}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{elapsed}} {{wide_msg}}");
                    (ProgressBar::with_draw_target(Some(total), target), t)
                } else {
                    let t = format!("{{prefix:>16}} {{spinner}} {{pos}} {unit} {{elapsed}} {{wide_msg}}");
                    (ProgressBar::with_draw_target(None, target), t)
                };
                if let Ok(style) = ProgressStyle::with_template(&template) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_prefix(task.to_string());
                self.bar = Some(bar);
            }
            Progress::Advance { by, note } => {
                if let Some(bar) = &self.bar {
                    bar.set_message(note.to_string());
                    bar.inc(by);
                }
            }
            Progress::Finish => {
                if let Some(bar) = self.bar.take() {
                    bar.finish_and_clear();
                }
            }
        }
    }
}
