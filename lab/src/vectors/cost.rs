//! What an entry costs to run, estimated from its fields before anything is expanded, and the
//! limits a run holds entries to (`lab run --max-entry-bytes`, `--max-run-bytes`).
//!
//! The cost of an entry is the input bytes its kernel calls read over all its cases (the
//! guarded case, its misaligned twin and one per offset) plus [`CALL_BYTES`] per call: a call costs a state buffer
//! and its guard page even when it reads little. Memory stays bounded whatever the cost (long
//! inputs are split into chunks); the limits bound the run time a small file can ask for.

use super::{Body, Vector, VectorError, VectorSet};

/// Bytes charged per kernel call.
pub const CALL_BYTES: u64 = 4096;

/// Bytes of one chunk that long digests and tags are split into (a `md5_implCompressMB` or
/// `poly1305_processBlocks` call takes at most this much); a multiple of 64 and of 16.
pub const CHUNK: u64 = 4 << 20;

/// Limits on the estimated cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostLimits {
    /// Most bytes one entry may cost (default 2 GiB: a 256 MiB message at a few offsets).
    pub max_entry_bytes: u64,
    /// Most bytes all entries of a run may cost together (default 16 GiB; the bundled files
    /// cost about 0.2 GiB).
    pub max_run_bytes: u64,
}

impl Default for CostLimits {
    fn default() -> Self {
        CostLimits { max_entry_bytes: 2 << 30, max_run_bytes: 16 << 30 }
    }
}

/// The estimated cost of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryCost {
    /// Cases (the guarded case, its misaligned twin, one per offset).
    pub cases: u64,
    /// Input bytes the calls of one case read.
    pub bytes_per_case: u64,
    /// Kernel calls of one case.
    pub calls_per_case: u64,
}

impl EntryCost {
    /// The cost in bytes (saturating).
    pub fn total(&self) -> u64 {
        self.cases.saturating_mul(self.bytes_per_case.saturating_add(self.calls_per_case.saturating_mul(CALL_BYTES)))
    }
}

impl Vector {
    /// The estimated cost (see the module docs); never expands a message.
    pub fn cost(&self) -> EntryCost {
        let chunks = |len: u64| len / CHUNK + 1;
        let (bytes, calls) = match &self.body {
            Body::Md5Digest { msg, updates, .. } => {
                let len = msg.len() as u64;
                (len + 128, 2 * updates.len() as u64 + chunks(len) + 2)
            }
            Body::Md5Call(c) => (crate::reference::md5::mb_blocks(c.ofs, c.limit) as u64 * 64, 1),
            Body::Poly1305Tag { msg, .. } => (msg.len() as u64, chunks(msg.len() as u64) + 4),
            Body::Poly1305Call(c) => {
                let bytes =
                    c.lengths.iter().map(|&l| super::whole_blocks(l) as u64 * 16).fold(0u64, u64::saturating_add);
                (bytes, c.lengths.len() as u64)
            }
            Body::Md5Chain(c) => {
                let steps = c.steps as u64;
                (c.seed.len() as u64 + 128 * steps, 2 * steps + chunks(c.seed.len() as u64) + 2)
            }
            Body::Poly1305MacOfMacs(m) => {
                let n = m.count as u64;
                (n * n / 2 + 16 * n, n + 1)
            }
        };
        EntryCost { cases: 2 + self.offsets.len() as u64, bytes_per_case: bytes, calls_per_case: calls }
    }
}

/// Refuses the entries over `limits`: each entry over `max_entry_bytes`, and each entry that
/// would take the run's total over `max_run_bytes` (counted in file order, once per run, not
/// per variant or backend). Refused entries leave their sets; returns an error for each.
pub fn enforce(sets: &mut [VectorSet], limits: CostLimits) -> Vec<VectorError> {
    let mut errors = Vec::new();
    let mut run_total: u64 = 0;
    for set in sets.iter_mut() {
        let file = set.file.clone();
        set.vectors.retain(|v| {
            let cost = v.cost();
            let total = cost.total();
            let problem = if total > limits.max_entry_bytes {
                Some(format!(
                    "would cost {total} bytes ({} cases x {} bytes read + {} calls), over the entry limit of {} \
                     (--max-entry-bytes)",
                    cost.cases, cost.bytes_per_case, cost.calls_per_case, limits.max_entry_bytes
                ))
            } else if run_total.saturating_add(total) > limits.max_run_bytes {
                Some(format!(
                    "would take the run to {} bytes, over the run limit of {} (--max-run-bytes)",
                    run_total.saturating_add(total),
                    limits.max_run_bytes
                ))
            } else {
                None
            };
            match problem {
                Some(problem) => {
                    errors.push(VectorError {
                        file: file.clone(),
                        entry: Some((v.index, Some(v.name.clone()))),
                        field: None,
                        problem,
                    });
                    false
                }
                None => {
                    run_total += total;
                    true
                }
            }
        });
    }
    errors
}
