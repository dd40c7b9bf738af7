//! Progress bars (indicatif) for the library's [`Progress`] events. They draw on stderr and
//! stay hidden when stderr is not a terminal (CI logs, pipes), so reports stay clean. A task
//! that several workers run (`lab run --jobs N`) gets one bar for the whole task and, under it,
//! one line per busy worker saying what it runs (indicatif's `MultiProgress`).

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kernel_lab::progress::Progress;

/// The bars of the task in progress, if any.
pub struct Bars {
    multi: MultiProgress,
    bar: Option<ProgressBar>,
    /// One line per worker, by lane number (`None`: idle or not started).
    lanes: Vec<Option<ProgressBar>>,
}

impl Default for Bars {
    fn default() -> Self {
        Bars { multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()), bar: None, lanes: Vec::new() }
    }
}

impl Bars {
    /// Draws one event: `Start` opens a bar (a spinner when the total is unknown), `Advance`
    /// moves it, `Lane` shows what one worker runs, `Finish` clears them all.
    pub fn handle(&mut self, event: Progress<'_>) {
        match event {
            Progress::Start { task, total, unit } => {
                self.clear();
                let (bar, template) = if total > 0 {
                    let t = format!("{{prefix:>16}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{elapsed}} {{wide_msg}}");
                    (ProgressBar::new(total), t)
                } else {
                    let t = format!("{{prefix:>16}} {{spinner}} {{pos}} {unit} {{elapsed}} {{wide_msg}}");
                    (ProgressBar::new_spinner(), t)
                };
                if let Ok(style) = ProgressStyle::with_template(&template) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_prefix(task.to_string());
                self.bar = Some(self.multi.add(bar));
            }
            Progress::Advance { by, note } => {
                if let Some(bar) = &self.bar {
                    // With workers, their own lines say what runs.
                    if self.lanes.iter().all(Option::is_none) {
                        bar.set_message(note.to_string());
                    } else {
                        bar.set_message("");
                    }
                    bar.inc(by);
                }
            }
            Progress::Lane { lane, note } => self.lane(lane, note),
            Progress::Finish => self.clear(),
        }
    }

    /// Shows `note` on worker `lane`'s line, or removes the line when `note` is empty.
    fn lane(&mut self, lane: usize, note: &str) {
        if self.lanes.len() <= lane {
            self.lanes.resize_with(lane + 1, || None);
        }
        if note.is_empty() {
            if let Some(line) = self.lanes[lane].take() {
                line.finish_and_clear();
                self.multi.remove(&line);
            }
            return;
        }
        let line = self.lanes[lane].get_or_insert_with(|| {
            let line = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{prefix:>16} {wide_msg}") {
                line.set_style(style);
            }
            line.set_prefix(format!("job {}", lane + 1));
            self.multi.add(line)
        });
        if line.message() != note {
            line.set_message(note.to_string());
        }
    }

    fn clear(&mut self) {
        for line in self.lanes.drain(..).flatten() {
            line.finish_and_clear();
            self.multi.remove(&line);
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
    }
}
