//! Recovery after a surprise: the calls of an entry run again one at a time on a fresh guest to
//! pin the surprise to its call, a hang's response, and the replay of the calls before a resume.

use super::*;

impl ProcessBackend {
    /// After a surprise in a whole entry: runs its calls again one per entry on a fresh guest,
    /// from the payload as sent, so the surprise is pinned to the call that causes it (a fault
    /// of that call) and the calls before it keep results that passed every check. Calls run in
    /// the same order on the same arena, so snapshot copies see what they saw before.
    pub(super) fn step(
        &mut self,
        payload: &[u8],
        resp_len: usize,
        sum: (u64, u64),
        first: (FaultKind, String),
    ) -> Result<RawRun, BackendError> {
        let word = |w: protocol::Word| header_word(payload, w);
        let (start, ncalls) = (word(header::START), word(header::NCALLS));
        self.shared.as_mut().expect("arena created").write(payload);
        self.relay_poison();
        for call in start..ncalls {
            // Only a response this loop returns as it came may be recycled as lent.
            self.forget_lent();
            self.one_call_head(payload, call);
            match self.exchange(resp_len, sum, true)? {
                Answer::Run(run) if run.fault.is_none() => continue,
                Answer::Run(run) if run.resp.is_empty() => return Ok(self.hung(payload, resp_len, run)),
                Answer::Run(run) => return Ok(run),
                Answer::Surprise { kind, detail } => {
                    let resp = self.shared.as_ref().expect("arena created").read(resp_len);
                    let call = usize::try_from(call).ok();
                    return Ok(RawRun { resp, fault: Some(Fault { kind, pc: None, call, detail }) });
                }
            }
        }
        // Every call passed on its own: the first surprise did not come back. Its entry's
        // results are still not trusted: no call of it counts as run (the payload as sent).
        self.forget_lent();
        let (kind, detail) = first;
        let detail = format!("{detail}; not reproduced when the calls ran one at a time");
        let mut resp = payload[..resp_len.min(payload.len())].to_vec();
        resp.resize(resp_len, 0);
        Ok(RawRun { resp, fault: Some(Fault { kind, pc: None, call: None, detail }) })
    }

    /// A hang without a PC: the response is the payload as sent.
    pub(super) fn hung(&self, payload: &[u8], resp_len: usize, run: RawRun) -> RawRun {
        RawRun { resp: payload[..resp_len].to_vec(), fault: run.fault }
    }

    /// The response as it stood before a resumed entry of `batch` at call `start`, rebuilt on
    /// a fresh guest: the batch as sent, then its calls before `start` one per entry (their
    /// faults are known already). A resumed entry that faults returns only the header, so the
    /// host holds no copy; only an entry that ends in a surprise or an unanswered hang needs
    /// this, for [`step`](Self::step) and [`hung`](Self::hung), which start from that state.
    pub(super) fn replay(&mut self, batch: &crate::batch::Batch, start: usize) -> Result<Vec<u8>, BackendError> {
        let _ = self.reap();
        self.shared.as_mut().expect("arena created").write(&batch.payload);
        self.relay_poison();
        let sum = table_range(&batch.payload, self.arena.addr, self.entry_bytes);
        for call in 0..start as u64 {
            self.one_call_head(&batch.payload, call);
            self.exchange(batch.resp_len, sum, false)?;
        }
        self.forget_lent();
        Ok(self.shared.as_ref().expect("arena created").read_sparse(batch.resp_len, &self.guards.0))
    }
}
