//! A bounded pool of worker threads for independent pieces of work (the variant × backend cells
//! of `lab run`). Workers take jobs in the order the caller ranks them (longest first keeps the
//! cores busy to the end), results come back in job order, so what the caller builds from them
//! does not depend on the number of workers or on who finished first. Progress events of the
//! workers are forwarded to the caller's callback on the calling thread (callbacks that draw
//! bars need not be `Send`).
//!
//! Each job runs wholly on one worker thread, so a job may own `!Send` state (a Unicorn engine)
//! as long as it creates and drops it inside the job.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;

use crate::progress::Progress;

/// The default number of workers: the CPUs this process may use
/// ([`std::thread::available_parallelism`]), 1 when that cannot be told.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `jobs` as asked, 0 meaning [`default_jobs`].
pub fn resolve_jobs(jobs: usize) -> usize {
    if jobs == 0 {
        default_jobs()
    } else {
        jobs
    }
}

/// A progress event sent by a worker: `by` more units done, `note` what it works on now.
struct Event {
    lane: usize,
    by: u64,
    note: String,
}

/// What a job gets to report progress with: [`Lane::advance`] forwards an
/// [`Progress::Advance`] and a [`Progress::Lane`] to the caller's callback.
pub struct Lane {
    lane: usize,
    tx: mpsc::Sender<Event>,
}

impl Lane {
    /// `by` more units are done; `note` says what this worker works on now.
    pub fn advance(&self, by: u64, note: &str) {
        // The receiver outlives every worker (it is drained until they are all done).
        let _ = self.tx.send(Event { lane: self.lane, by, note: note.to_string() });
    }

    /// A progress callback for code that takes one (`&mut dyn FnMut(Progress)`): forwards
    /// `Advance` events, drops the others (the caller opens and closes the task).
    pub fn callback(&self) -> impl FnMut(Progress<'_>) + '_ {
        move |e| {
            if let Progress::Advance { by, note } = e {
                self.advance(by, note);
            }
        }
    }
}

/// Runs `work` on every job of `jobs` with at most `workers` threads (at least one), taking
/// them in the order of `rank` (indices into `jobs`; jobs it leaves out run after the ranked
/// ones, in job order). Returns the results in job order. Progress from the workers reaches
/// `progress` on this thread as `Advance` and `Lane` events; a worker that finishes its last
/// job sends a `Lane` with an empty note.
///
/// A job that panics (a lab bug) gives `None` as its result; the other jobs still run.
pub fn run_ordered<J, T, F>(
    jobs: &[J],
    workers: usize,
    rank: &[usize],
    work: F,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Vec<Option<T>>
where
    J: Sync,
    T: Send,
    F: Fn(&J, &Lane) -> T + Sync,
{
    let mut order: Vec<usize> = rank.iter().copied().filter(|&i| i < jobs.len()).collect();
    order.extend((0..jobs.len()).filter(|i| !rank.contains(i)));
    order.dedup();
    let results: Vec<Mutex<Option<T>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let workers = workers.clamp(1, jobs.len().max(1));
    let (tx, rx) = mpsc::channel::<Event>();
    std::thread::scope(|scope| {
        for lane in 0..workers {
            let lane = Lane { lane, tx: tx.clone() };
            let (order, next, results, work) = (&order, &next, &results, &work);
            scope.spawn(move || {
                while let Some(&job) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&jobs[job], &lane)));
                    if let (Ok(out), Ok(mut slot)) = (out, results[job].lock()) {
                        *slot = Some(out);
                    }
                }
                lane.advance(0, "");
            });
        }
        drop(tx);
        // Ends when every worker has dropped its sender.
        for e in rx {
            progress(Progress::Lane { lane: e.lane, note: &e.note });
            if e.by > 0 {
                progress(Progress::Advance { by: e.by, note: &e.note });
            }
        }
    });
    results.into_iter().map(|m| m.into_inner().ok().flatten()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_job_order_whatever_the_workers() {
        let jobs: Vec<u64> = (0..40).collect();
        let rank: Vec<usize> = (0..40).rev().collect();
        for workers in [1, 2, 3, 8] {
            let mut advanced = 0;
            let mut lanes = std::collections::BTreeSet::new();
            let out = run_ordered(
                &jobs,
                workers,
                &rank,
                |j, lane| {
                    lane.advance(1, "job");
                    j * j
                },
                &mut |e| match e {
                    Progress::Advance { by, .. } => advanced += by,
                    Progress::Lane { lane, .. } => {
                        lanes.insert(lane);
                    }
                    _ => {}
                },
            );
            let want: Vec<Option<u64>> = jobs.iter().map(|j| Some(j * j)).collect();
            assert_eq!(out, want, "{workers} workers");
            assert_eq!(advanced, 40);
            assert!(lanes.len() <= workers && !lanes.is_empty(), "{lanes:?} with {workers} workers");
        }
    }

    #[test]
    fn a_panicking_job_gives_none_and_the_others_run() {
        let jobs = [1u32, 0, 3];
        let out = run_ordered(&jobs, 2, &[], |&j, _| 6 / j, &mut |_| {});
        assert_eq!(out, vec![Some(6), None, Some(2)]);
    }

    #[test]
    fn jobs_run_in_rank_order_on_one_worker() {
        let jobs = [0usize, 1, 2, 3];
        let seen = Mutex::new(Vec::new());
        run_ordered(&jobs, 1, &[2, 0], |&j, _| seen.lock().unwrap().push(j), &mut |_| {});
        assert_eq!(*seen.lock().unwrap(), vec![2, 0, 1, 3]);
    }
}
