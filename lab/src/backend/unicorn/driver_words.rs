//! The driver's private words a process guest holds when its request loop calls `lab_batch`,
//! written into the engine before each request, so that a kernel reads the same driver state
//! under Unicorn as under qemu-user or natively (issue 28, docs/threat-model.md).
//!
//! Under Unicorn `_start` and the request loop never run. Before it calls `lab_batch` the loop
//! clears everything of the driver it does not keep (the request and reply tokens, the handler
//! check's result, the callee-saved registers: `batch_clean` in kernels/*/driver.S), so what is
//! left to write here is what it keeps: the request's sequence number (`lab_io_seq`), the loop's
//! stack pointer (`lab_loop_sp`, `lab_stack_top` on every architecture), the request's checksum
//! range (`lab_io_sum`: offset and length in the arena, as the host computes it,
//! [`table_range`]) and the id of the protection table in force (`lab_prot_id`: the header's
//! `prot_id`, which the loop copies once the table is applied).

use unicorn_engine::Unicorn;

use super::{uc_err, BackendError};
use crate::backend::process::exchange::{from_entry, table_range};
use crate::image::{Image, ImageError};

/// Where the words lie in the image (guest addresses), and the sequence number of the next
/// request.
#[derive(Debug)]
pub(super) struct DriverWords {
    seq_at: u64,
    loop_sp_at: u64,
    sum_at: u64,
    prot_id_at: u64,
    stack_top: u64,
    /// Bytes of one call-table entry (the checksum range counts whole entries).
    entry_bytes: usize,
    /// Requests made so far: a process guest's `lab_io_seq` counts the requests it answered.
    seq: u64,
}

impl DriverWords {
    /// The words' addresses in `image`, whose call-table entries are `entry_bytes` long.
    ///
    /// # Errors
    /// A driver symbol the image lacks ([`ImageError::MissingSymbol`]).
    pub(super) fn new(image: &Image, entry_bytes: usize) -> Result<Self, ImageError> {
        Ok(DriverWords {
            seq_at: image.require("lab_io_seq")?.addr,
            loop_sp_at: image.require("lab_loop_sp")?.addr,
            sum_at: image.require("lab_io_sum")?.addr,
            prot_id_at: image.require("lab_prot_id")?.addr,
            stack_top: image.require("lab_stack_top")?.addr,
            entry_bytes,
            seq: 0,
        })
    }

    /// Writes the words of the next request: `payload` (a batch laid out for the arena at
    /// `arena_addr`) from call `start` on, with protection table `prot_id` in force. One request
    /// per entry the host would send a process guest: a run Unicorn repeats inside one request
    /// (a bounds confirmation) does not count.
    ///
    /// # Errors
    /// Unicorn refuses a write.
    pub(super) fn write(
        &mut self,
        uc: &mut Unicorn<'static, ()>,
        payload: &[u8],
        arena_addr: u64,
        start: usize,
        prot_id: u64,
    ) -> Result<(), BackendError> {
        let sum = from_entry(table_range(payload, arena_addr, self.entry_bytes), start, self.entry_bytes);
        let words = [
            (self.seq_at, self.seq),
            (self.loop_sp_at, self.stack_top),
            (self.sum_at, sum.0),
            (self.sum_at + 8, sum.1),
        ];
        for (at, value) in words.into_iter().chain([(self.prot_id_at, prot_id)]) {
            uc.mem_write(at, &value.to_le_bytes()).map_err(uc_err("write a driver word"))?;
        }
        self.seq += 1;
        Ok(())
    }
}
