//! Instructions per translation block, cached by block address, and an execution profile built
//! on it. A Unicorn block hook sees every translation block (TB) start with its address; the
//! number of guest instructions in the TB comes once from `uc_ctl(UC_CTL_TB_REQUEST_CACHE)`
//! (`uc_tb.icount`) and is then a table lookup. docs/DESIGN.md (measured): counting this way runs at
//! about 1.6 G instructions/s, a code hook about ten times slower.
//!
//! [`BlockIcounts`] is the shared piece: anything that counts instructions in a block hook (the
//! bench profiles, a per-call instruction budget) asks it. A TB is straight-line code from its
//! start address, so a TB that starts inside a symbol's range belongs to that symbol; kernels
//! are entered by a call and left by a return, both of which end a TB.

use rustc_hash::FxHashMap;
use unicorn_engine::{TranslationBlock, Unicorn};

/// Guest instructions per translation block, by block start address.
#[derive(Debug, Default, Clone)]
pub struct BlockIcounts {
    /// FxHash, not SipHash: this lookup runs at every block (SipHash was ~20% of a Zbb run).
    icount: FxHashMap<u64, (u32, u32)>,
    /// A direct-mapped cache in front of `icount` (block address, size, instructions), indexed
    /// by the address's low bits: the hook runs at every block, and a hash lookup there was
    /// ~3% of a Unicorn run. Empty until the first lookup.
    recent: Vec<(u64, u32, u32)>,
    mismatches: u64,
}

/// Entries of [`BlockIcounts::recent`] (a power of two).
const RECENT: usize = 4096;

impl BlockIcounts {
    /// Instructions in the TB that starts at `addr` and is `size` bytes long (the block hook's
    /// arguments). The first sight of a block asks Unicorn for its TB; later ones hit the cache.
    /// A TB whose translated size differs from `size` (never seen so far) is counted in
    /// [`mismatches`](Self::mismatches), so a claim of exact counts can be checked.
    pub fn get<D>(&mut self, uc: &Unicorn<D>, addr: u64, size: u32) -> u32 {
        if self.recent.is_empty() {
            self.recent = vec![(u64::MAX, 0, 0); RECENT];
        }
        // Instructions are at least 2 bytes apart on every target the lab runs but x86, where
        // blocks rarely start at neighbouring bytes.
        let slot = (addr >> 1) as usize & (RECENT - 1);
        let (a, sz, n) = self.recent[slot];
        if a == addr && sz == size {
            return n;
        }
        if let Some(&(n, sz)) = self.icount.get(&addr) {
            if sz == size {
                self.recent[slot] = (addr, size, n);
                return n;
            }
        }
        let mut tb = TranslationBlock { pc: 0, icount: 0, size: 0 };
        let n = match uc.ctl_request_cache(addr, Some(&mut tb)) {
            Ok(()) => u32::from(tb.icount),
            Err(_) => 0,
        };
        if u32::from(tb.size) != size {
            self.mismatches += 1;
        }
        self.icount.insert(addr, (n, size));
        self.recent[slot] = (addr, size, n);
        n
    }

    /// Blocks whose cached translation had another size than the executed one (0 = exact).
    pub fn mismatches(&self) -> u64 {
        self.mismatches
    }
}

/// How often each translation block inside a code range ran: enough to give the instruction
/// count of the range and, with a disassembly, its instruction mix.
#[derive(Debug, Default, Clone)]
pub struct BlockProfile {
    /// Inclusive start and exclusive end of the profiled guest code range.
    pub range: (u64, u64),
    /// (block start address, size in bytes) -> (instructions in the block, executions).
    blocks: FxHashMap<(u64, u32), (u32, u64)>,
    icounts: BlockIcounts,
}

impl BlockProfile {
    /// An empty profile of the guest addresses `start..end`.
    pub fn new(start: u64, end: u64) -> BlockProfile {
        BlockProfile { range: (start, end), ..BlockProfile::default() }
    }

    /// A profile of single instructions, `(pc, executions)`, each a one-instruction block
    /// (qemu's exec log under `-singlestep`, [`super::exec_trace`]).
    pub fn of_instructions(start: u64, end: u64, pcs: impl IntoIterator<Item = (u64, u64)>) -> BlockProfile {
        let blocks = pcs.into_iter().map(|(pc, k)| ((pc, 0), (1, k))).collect();
        BlockProfile { range: (start, end), blocks, ..BlockProfile::default() }
    }

    /// Records one execution of the block at `addr` (`size` bytes), if it is in the range.
    pub fn record<D>(&mut self, uc: &Unicorn<D>, addr: u64, size: u32) {
        if addr < self.range.0 || addr >= self.range.1 {
            return;
        }
        if let Some(e) = self.blocks.get_mut(&(addr, size)) {
            e.1 += 1;
            return;
        }
        let n = self.icounts.get(uc, addr, size);
        self.blocks.insert((addr, size), (n, 1));
    }

    /// Guest instructions executed in the range.
    pub fn instructions(&self) -> u64 {
        self.blocks.values().map(|&(n, k)| u64::from(n) * k).sum()
    }

    /// Every block that ran: (start address, instructions in it, executions), by address.
    pub fn blocks(&self) -> Vec<(u64, u32, u64)> {
        let mut v: Vec<_> = self.blocks.iter().map(|(&(a, _), &(n, k))| (a, n, k)).collect();
        v.sort_unstable();
        v
    }

    /// See [`BlockIcounts::mismatches`].
    pub fn mismatches(&self) -> u64 {
        self.icounts.mismatches()
    }
}
