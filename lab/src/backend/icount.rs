//! Instructions per Unicorn translation block, cached by block address, so a block hook can
//! count guest instructions cheaply (DESIGN.md "Backend facts": a block hook reading
//! `ctl_request_cache(addr).icount` through a per-block cache ran at 1.6 G instructions/s; a
//! code hook runs about ten times slower). Shared by the hang budget and instruction counting.

use std::collections::HashMap;

use unicorn_engine::{TranslationBlock, Unicorn};

/// Instruction counts of the blocks seen so far, by block start address.
///
/// The kernels do not modify their code, so a block at a given address always holds the same
/// instructions; the cache lives as long as the engine.
#[derive(Debug, Default)]
pub struct BlockCounts {
    cache: HashMap<u64, u64>,
}

impl BlockCounts {
    /// Guest instructions in the block at `addr` (`size` bytes, as the block hook reports it).
    /// Falls back to `size / 4` (at least 1) if Unicorn cannot describe the block.
    pub fn icount<D>(&mut self, uc: &Unicorn<'_, D>, addr: u64, size: u32) -> u64 {
        *self.cache.entry(addr).or_insert_with(|| {
            let mut tb = TranslationBlock { pc: 0, icount: 0, size: 0 };
            match uc.ctl_request_cache(addr, Some(&mut tb)) {
                Ok(()) if tb.icount > 0 => u64::from(tb.icount),
                _ => u64::from(size / 4).max(1),
            }
        })
    }
}
