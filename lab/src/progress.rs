//! Progress events: long operations (building kernels, running vector sets, fuzzing) report
//! what they do through a callback (from the calling thread, also when workers do the work), and the caller decides how to show it. The library draws
//! nothing; the CLI turns these into indicatif bars (nextest's split of runner events and
//! reporters).

/// One progress event. Tasks do not nest: each `Start` is closed by a `Finish` before the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// A task begins: `total` units of work (0 when the amount is not known in advance, such as
    /// a fuzz campaign bounded by time), counted in `unit` ("images", "cases").
    Start {
        /// What the task does, for a label ("building kernels").
        task: &'a str,
        /// Units of work in the task, or 0 when unknown.
        total: u64,
        /// What one unit is.
        unit: &'a str,
    },
    /// `by` more units are done; `note` says what is being worked on now.
    Advance {
        /// Units finished since the last event.
        by: u64,
        /// The current item ("riscv64 on qemu, md5 / rfc1321").
        note: &'a str,
    },
    /// Worker `lane` (from 0) of a task run by several threads ([`crate::pool`]) now works on
    /// `note` (empty: the worker is done). Sent beside `Advance`, which counts for the task.
    Lane {
        /// The worker, from 0.
        lane: usize,
        /// What it works on, or empty when it has finished.
        note: &'a str,
    },
    /// The task is over.
    Finish,
}

/// A progress callback that ignores every event.
pub fn ignore(_: Progress<'_>) {}
