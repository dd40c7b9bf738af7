//! Instruction counts under qemu-user from its exec log: the counter for code Unicorn cannot
//! run (RVV, AVX2, SVE2). This host has no PMU and the Debian qemu-user 7.2 package ships no
//! TCG plugins (`dpkg -L qemu-user`: no `libinsn.so`), so the count comes from qemu's own log:
//!
//! * `-singlestep` makes every translation block (TB) one guest instruction;
//! * `-d exec,nochain` logs a `Trace` line before every TB it executes (`nochain` keeps TBs
//!   from jumping straight into each other unlogged);
//! * `-dfilter START+LEN` keeps only TBs whose pc lies in the kernel's code range, so the
//!   driver's own instructions are neither logged nor counted (as on Unicorn).
//!
//! With no `-D` file the log goes to the guest's stderr, which the lab already reads: the
//! confined guest writes no file. qemu flushes each line before the guest goes on, so every
//! line of a call is in the pipe before the driver's reply. A line looks like
//! `Trace 0: 0x7f1af8200100 [0000000000000000/0000000000401000/1040c0b3/00000201] sym`: the
//! second field in the brackets is the guest pc.

use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rustc_hash::FxHashMap;

use super::icount::BlockProfile;

/// How reports name this counter.
pub const COUNTER: &str = "counted under qemu (exec log)";

/// The qemu options that log every instruction executed in `start..end` (guest addresses).
pub fn qemu_args(start: u64, end: u64) -> Vec<String> {
    vec![
        "-singlestep".into(),
        "-d".into(),
        "exec,nochain".into(),
        "-dfilter".into(),
        format!("{start:#x}+{:#x}", end.saturating_sub(start)),
    ]
}

/// The guest pc of one exec-log line, or `None` for any other line.
pub fn parse_line(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("Trace ")?;
    let inside = rest.split_once('[')?.1.split_once(']')?.0;
    let pc = inside.split('/').nth(1)?;
    u64::from_str_radix(pc, 16).ok()
}

/// Executions per guest pc, filled by the guest's stderr reader.
#[derive(Debug, Default)]
struct Counts {
    /// pc -> executions.
    pcs: FxHashMap<u64, u64>,
    /// Whether the reader reached the end of the stream (the guest ended).
    finished: bool,
}

/// The exec log of one guest, shared between its stderr reader thread and the counter.
#[derive(Debug, Default)]
pub struct ExecTrace {
    counts: Mutex<Counts>,
    ended: Condvar,
}

/// Bytes of non-trace stderr text kept for reports (as for an untraced guest).
const OTHER_KEPT: usize = 4096;

/// Longest piece of a line read at once (a trace line is about 80 bytes).
const LINE_MAX: u64 = 1024;

impl ExecTrace {
    /// A fresh, empty trace.
    pub fn new() -> Arc<ExecTrace> {
        Arc::new(ExecTrace::default())
    }

    /// Reads a guest's stderr to its end: trace lines are counted, other text (qemu's own
    /// words) is returned, its first 4 KiB.
    pub fn drain(&self, from: impl Read) -> String {
        let mut other: Vec<u8> = Vec::new();
        let mut batch: Vec<u64> = Vec::with_capacity(4096);
        let mut reader = BufReader::with_capacity(1 << 16, from);
        let mut line: Vec<u8> = Vec::with_capacity(256);
        loop {
            line.clear();
            // At most LINE_MAX bytes at a time: a guest writing one endless line to its
            // stderr costs no memory (the rest of such a line is read as further pieces).
            match (&mut reader).take(LINE_MAX).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => match std::str::from_utf8(&line).ok().and_then(parse_line) {
                    Some(pc) => {
                        batch.push(pc);
                        if batch.len() == batch.capacity() {
                            self.add(&mut batch);
                        }
                    }
                    None => {
                        let room = OTHER_KEPT.saturating_sub(other.len());
                        other.extend_from_slice(&line[..line.len().min(room)]);
                    }
                },
            }
        }
        self.add(&mut batch);
        if let Ok(mut c) = self.counts.lock() {
            c.finished = true;
        }
        self.ended.notify_all();
        String::from_utf8_lossy(&other).into_owned()
    }

    fn add(&self, batch: &mut Vec<u64>) {
        if let Ok(mut c) = self.counts.lock() {
            for &pc in batch.iter() {
                *c.pcs.entry(pc).or_insert(0) += 1;
            }
        }
        batch.clear();
    }

    /// Waits up to `wait` for the reader to reach the end of the guest's stderr (the guest has
    /// been ended), then returns the executions in `start..end` as a profile of one-instruction
    /// blocks, and empties the trace.
    ///
    /// # Errors
    /// The reader did not finish in time (the log would be incomplete).
    pub fn take(&self, start: u64, end: u64, wait: Duration) -> Result<BlockProfile, String> {
        let guard = self.counts.lock().map_err(|_| "the exec-log reader panicked".to_string())?;
        let (mut c, timeout) = self
            .ended
            .wait_timeout_while(guard, wait, |c| !c.finished)
            .map_err(|_| "the exec-log reader panicked".to_string())?;
        if timeout.timed_out() && !c.finished {
            return Err(format!("qemu's exec log was not read to its end within {} s", wait.as_secs()));
        }
        let pcs = std::mem::take(&mut c.pcs);
        c.finished = false;
        Ok(BlockProfile::of_instructions(start, end, pcs.into_iter().filter(|(pc, _)| (start..end).contains(pc))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_give_their_guest_pc() {
        let l = "Trace 0: 0x7f1af8200100 [0000000000000000/0000000000401005/1040c0b3/00000201] \n";
        assert_eq!(parse_line(l), Some(0x401005));
        let l = "Trace 0: 0x7f00 [00000000/0000000000011258/00000000/00000201] md5_implCompress\n";
        assert_eq!(parse_line(l), Some(0x11258));
        assert_eq!(parse_line("qemu: uncaught target signal 11\n"), None);
        assert_eq!(parse_line("Trace 0: garbage\n"), None);
    }

    #[test]
    fn drained_lines_are_counted_per_pc_and_other_text_kept() {
        let log = "Trace 0: 0x1 [0/0000000000001000/0/0] \nTrace 0: 0x2 [0/0000000000001004/0/0] \n\
                   warning: something\nTrace 0: 0x2 [0/0000000000001004/0/0] \nTrace 0: 0x3 [0/0000000000009000/0/0] \n";
        let t = ExecTrace::new();
        assert_eq!(t.drain(log.as_bytes()), "warning: something\n");
        let p = t.take(0x1000, 0x2000, Duration::from_secs(1)).unwrap();
        assert_eq!(p.instructions(), 3, "the pc outside the range is not counted");
        assert_eq!(p.blocks(), vec![(0x1000, 1, 1), (0x1004, 1, 2)]);
        assert!(t.take(0x1000, 0x2000, Duration::from_millis(10)).is_err(), "no reader finished again");
    }

    #[test]
    fn an_endless_line_is_read_in_pieces_and_kept_bounded() {
        let mut log = vec![b'x'; 1 << 20];
        log.extend_from_slice(b"\nTrace 0: 0x1 [0/0000000000001000/0/0] \n");
        let t = ExecTrace::new();
        assert_eq!(t.drain(log.as_slice()).len(), OTHER_KEPT);
        assert_eq!(t.take(0x1000, 0x2000, Duration::from_secs(1)).unwrap().instructions(), 1);
    }
}
