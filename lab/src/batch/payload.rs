//! Payload and builder allocations kept per thread between batches, so a run of hundreds of
//! batches does not zero or fault in fresh memory for each.

use super::{BatchBuilder, Placed};

/// A payload allocation holding only zeros ([`Batch::into_payload`](super::Batch::into_payload)), for
/// [`BatchBuilder::layout_and_clear`]: a run lays hundreds of batches of hundreds of KiB, and
/// zeroing each whole (or a fresh allocation's page faults) cost more than zeroing what the
/// last batch wrote.
#[derive(Debug, Default)]
pub struct ZeroedPayload {
    /// The payload bytes, all zero.
    pub(super) bytes: Vec<u8>,
    /// The allocations of the last batch's tables of its buffers and calls (empty), for the
    /// next batch: a batch of thousands of buffers would otherwise take fresh memory for them.
    pub(super) placed: Vec<Placed>,
    pub(super) names: Vec<&'static str>,
    pub(super) seeds: Vec<u64>,
}

thread_local! {
    /// This thread's spare builder allocations ([`BatchBuilder::take_spare`]).
    pub(super) static SPARE_BUILDER: std::cell::RefCell<Option<BatchBuilder>> = const { std::cell::RefCell::new(None) };
    /// This thread's spare payload, shared by every batch the thread lays (all vector sets and
    /// cells of `lab run`, all fuzz batches): a set that starts with a fresh allocation grows it
    /// through fresh pages the kernel must zero.
    pub(super) static SPARE_PAYLOAD: std::cell::RefCell<ZeroedPayload> = std::cell::RefCell::new(ZeroedPayload::default());
}

impl ZeroedPayload {
    /// Takes this thread's spare payload (empty if none was kept).
    pub fn take_spare() -> ZeroedPayload {
        SPARE_PAYLOAD.with(|s| std::mem::take(&mut *s.borrow_mut()))
    }

    /// Keeps `self` as this thread's spare payload for the next batch.
    pub fn keep_as_spare(self) {
        SPARE_PAYLOAD.with(|s| *s.borrow_mut() = self);
    }
}
