//! The kernel calls `lab bench` counts and times: which stub, how many blocks, where the input
//! sits, and the reference result of one call, so a count or a timing is only reported for a
//! kernel that computed the right answer.

use rand::Rng;

use crate::batch::{Arg, Batch, BatchBuilder, BufId};
use crate::cases::plan::Stubs;
use crate::image::Image;
use crate::reference::md5;
use crate::reference::poly1305::{self, Limbs26};
use crate::variant::{Kernel, MD5_IMPL_COMPRESS, MD5_IMPL_COMPRESS_MB, POLY1305_PROCESS_BLOCKS};

/// One kind of kernel call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// The contract.
    pub kernel: Kernel,
    /// Blocks per call (64 bytes for MD5, 16 for Poly1305).
    pub blocks: u64,
    /// Bytes past a 64-byte boundary where the input starts.
    pub misalign: usize,
    /// MD5 only: call `md5_implCompress` (one block) instead of `md5_implCompressMB`.
    pub single: bool,
}

/// The buffers of one call and what the reference says it must leave.
#[derive(Debug, Clone)]
pub struct Prepared {
    input: BufId,
    out: BufId,
    r: Option<BufId>,
    msg: Vec<u8>,
    out_init: Vec<u8>,
    r_limbs: Limbs26,
}

impl Workload {
    /// The multi-block stub of `kernel` over `blocks` blocks.
    pub fn of(kernel: Kernel, blocks: u64, misalign: usize) -> Workload {
        Workload { kernel, blocks, misalign, single: false }
    }

    /// `md5_implCompressMB` over `blocks` blocks.
    pub fn md5(blocks: u64, misalign: usize) -> Workload {
        Workload { kernel: Kernel::Md5, blocks, misalign, single: false }
    }

    /// `md5_implCompress`: one block.
    pub fn md5_single(misalign: usize) -> Workload {
        Workload { kernel: Kernel::Md5, blocks: 1, misalign, single: true }
    }

    /// `poly1305_processBlocks` over `blocks` blocks.
    pub fn poly1305(blocks: u64, misalign: usize) -> Workload {
        Workload { kernel: Kernel::Poly1305, blocks, misalign, single: false }
    }

    /// Block size of the kernel in bytes (RFC 1321: 64; RFC 8439: 16).
    pub fn block_bytes(kernel: Kernel) -> u64 {
        match kernel {
            Kernel::Md5 => 64,
            Kernel::Poly1305 => 16,
        }
    }

    /// Input bytes per call.
    pub fn bytes(&self) -> u64 {
        self.blocks * Workload::block_bytes(self.kernel)
    }

    /// The stub this workload calls.
    pub fn stub(&self) -> &'static str {
        match (self.kernel, self.single) {
            (Kernel::Md5, true) => MD5_IMPL_COMPRESS,
            (Kernel::Md5, false) => MD5_IMPL_COMPRESS_MB,
            (Kernel::Poly1305, _) => POLY1305_PROCESS_BLOCKS,
        }
    }

    /// Short label: `md5_implCompressMB x256`.
    pub fn label(&self) -> String {
        format!("{} x{}", self.stub(), self.blocks)
    }

    /// The guest code range `[start, end)` of the kernel's symbols (MD5: both stubs), from their
    /// `st_size`; instructions are attributed to the kernel when their block starts there.
    ///
    /// # Errors
    /// A missing symbol or one without a size (`.size` directive).
    pub fn code_range(kernel: Kernel, image: &Image) -> Result<(u64, u64), String> {
        let mut range = (u64::MAX, 0);
        for name in kernel.symbols() {
            let s = image.symbol(name).ok_or_else(|| format!("the image defines no {name}"))?;
            if s.size == 0 {
                return Err(format!("{name} has no size: add `.size {name}, . - {name}` to the source"));
            }
            range = (range.0.min(s.addr), range.1.max(s.addr + s.size));
        }
        Ok(range)
    }

    /// Adds the buffers of one call: random input, a random valid state or accumulator and r.
    pub fn prepare(&self, b: &mut BatchBuilder, rng: &mut impl Rng) -> Prepared {
        let msg: Vec<u8> = (0..self.bytes()).map(|_| rng.gen()).collect();
        let input = b.input(&msg, self.misalign);
        let (out_init, r_limbs) = match self.kernel {
            Kernel::Md5 => (rng.gen::<[u8; 16]>().to_vec(), Limbs26::default()),
            Kernel::Poly1305 => {
                let acc = Limbs26(std::array::from_fn(|i| rng.gen_range(0..if i == 4 { 1u64 << 27 } else { 1 << 26 })));
                (acc.to_bytes().to_vec(), poly1305::clamp_r(&rng.gen()))
            }
        };
        let out = b.output(&out_init);
        let r = (self.kernel == Kernel::Poly1305).then(|| b.input(&r_limbs.to_bytes(), 0));
        Prepared { input, out, r, msg, out_init, r_limbs }
    }

    /// Adds one call on the buffers of `p`; returns its index in the batch.
    pub fn call(&self, b: &mut BatchBuilder, e: &Stubs, p: &Prepared, seed: u64) -> usize {
        let abi = b.abi();
        let missing = "kernel symbols checked by code_range";
        let (func, args) = match self.kernel {
            Kernel::Md5 if self.single => {
                (e.md5_compress.expect(missing), [Arg::Ptr(p.input, 0), Arg::Ptr(p.out, 0), Arg::Imm(0), Arg::Imm(0)])
            }
            Kernel::Md5 => {
                let limit = (self.blocks as i32 - 1) * 64;
                let args = [
                    Arg::Ptr(p.input, 0),
                    Arg::Ptr(p.out, 0),
                    Arg::Imm(abi.int32_arg(0, 0)),
                    Arg::Imm(abi.int32_arg(limit, 0)),
                ];
                (e.md5_compress_mb.expect(missing), args)
            }
            Kernel::Poly1305 => {
                let r = p.r.expect("poly1305 has r");
                (
                    e.poly1305.expect(missing),
                    [Arg::Ptr(p.input, 0), Arg::Imm(self.bytes()), Arg::Ptr(p.out, 0), Arg::Ptr(r, 0)],
                )
            }
        };
        b.call(func, args, seed)
    }

    /// Checks the output of the single call made on `p` against the reference.
    ///
    /// # Errors
    /// A sentence saying what differs.
    pub fn verify(&self, p: &Prepared, batch: &Batch, resp: &[u8]) -> Result<(), String> {
        let got = batch.buffer(resp, p.out);
        match self.kernel {
            Kernel::Md5 => {
                let mut want = md5::state_from_bytes(&p.out_init);
                for block in p.msg.chunks(64) {
                    md5::compress(&mut want, block);
                }
                let got = md5::state_from_bytes(got);
                (got == want)
                    .then_some(())
                    .ok_or_else(|| format!("{}: state {got:08x?}, expected {want:08x?}", self.label()))
            }
            Kernel::Poly1305 => {
                let want = poly1305::process_blocks(&Limbs26::from_bytes(&p.out_init), &p.r_limbs, &p.msg);
                let got = Limbs26::from_bytes(got);
                (got.reduced() == want.reduced() && got.within_bounds())
                    .then_some(())
                    .ok_or_else(|| format!("{}: acc {got}, expected {want} (mod 2^130-5, within bounds)", self.label()))
            }
        }
    }
}
