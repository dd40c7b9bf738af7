//! Counting a call's instructions under qemu-user ([`crate::backend::exec_trace`]): the guest
//! is started with qemu's exec log of the kernel range on its stderr, and ended after the
//! counted batch so that the whole log has been read before the count is taken.

use std::sync::Arc;

use super::*;
use crate::backend::exec_trace::ExecTrace;
use crate::backend::icount::BlockProfile;

/// How long the count waits for the log reader after the guest ended (a 256-block MD5 call
/// logs about 200,000 lines, read in well under a second).
const READ_WAIT: Duration = Duration::from_secs(60);

impl ProcessBackend {
    /// Counts the instructions executed in `start..end` from the next batch on: ends the
    /// running guest, if any; the next batch starts one under `-singlestep -d exec,nochain
    /// -dfilter`. Replaces a running count.
    ///
    /// # Errors
    /// This backend is not qemu-user (native code has no exec log and this host no PMU).
    pub fn start_exec_trace(&mut self, start: u64, end: u64) -> Result<(), BackendError> {
        if self.kind != BackendKind::Qemu {
            return Err(BackendError::Unsupported(format!(
                "instruction counts need qemu's exec log, not {}",
                self.kind
            )));
        }
        let _ = self.reap();
        self.trace = Some((ExecTrace::new(), (start, end)));
        Ok(())
    }

    /// Ends the guest and the count started by [`start_exec_trace`](Self::start_exec_trace):
    /// the instructions executed in its range since then, one profile entry per instruction.
    ///
    /// # Errors
    /// No count was started, or the log was not read to its end in time.
    pub fn take_exec_trace(&mut self) -> Result<BlockProfile, String> {
        let _ = self.reap();
        let (trace, (start, end)) = self.trace.take().ok_or("no instruction count was started")?;
        let trace: Arc<ExecTrace> = trace;
        trace.take(start, end, READ_WAIT)
    }
}
