//! SIGINT/SIGTERM: stop honestly. [`install`] (called by the `lab` command, crate
//! `signal-hook`) starts a thread that, on the first signal, records it and kills the process
//! group of every live guest and build tool ([`register`]; lab/src/build_confine.rs); the run
//! loops see [`interrupted`], stop starting
//! work, and the command writes its report marked interrupted and exits with 128 + the signal
//! number (130 for SIGINT, 143 for SIGTERM). A second signal exits at once, without a report.
//! Unicorn batches run in-process and are not cut short: the run stops after the batch in
//! flight (its cases are skipped).
//!
//! A library user that never calls [`install`] keeps the default signal behaviour and
//! [`interrupted`] stays `None`.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The signal that interrupted the run, 0 while none did.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Pids (= process-group ids) of live guest processes.
static GROUPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Handles SIGINT and SIGTERM from now on (see the module documentation).
///
/// # Errors
/// The signal handlers cannot be registered.
pub fn install() -> std::io::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new().name("lab-signals".into()).spawn(move || {
        for sig in signals.forever() {
            let first = SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst).is_ok();
            kill_all();
            // A second signal while the run winds down (say, a long Unicorn batch): leave now,
            // without a report (the stale --output was removed at the start).
            if !first {
                std::process::exit(crate::exit::ExitCode::Interrupted(sig).code());
            }
        }
    })?;
    Ok(())
}

/// The signal that interrupted the run, if one did.
pub fn interrupted() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// `SIGINT`, `SIGTERM`, or `signal N`.
pub fn name(sig: i32) -> String {
    match sig {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// Records a guest that runs in its own process group (pgid = `pid`). If the run was already
/// interrupted, the guest is killed at once.
pub fn register(pid: u32) {
    if let Ok(mut g) = GROUPS.lock() {
        g.push(pid);
    }
    if interrupted().is_some() {
        crate::sandbox::kill_group(pid);
    }
}

/// Forgets a guest that has been reaped (its pid may be reused).
pub fn unregister(pid: u32) {
    if let Ok(mut g) = GROUPS.lock() {
        g.retain(|&p| p != pid);
    }
}

fn kill_all() {
    if let Ok(g) = GROUPS.lock() {
        for &pid in g.iter() {
            crate::sandbox::kill_group(pid);
        }
    }
}
