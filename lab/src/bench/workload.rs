//! The kernel calls `lab bench` counts and times: which stub, how many blocks, where the input
//! sits. A workload is a call entry planned and judged like any other case ([`crate::cases`]),
//! so a count or a timing is only reported for a kernel that computed the right answer.

use rand::RngExt;

use crate::batch::BatchBuilder;
use crate::cases::plan::{CasePlan, Layout, Stubs};
use crate::cases::procedure::CaseRun;
use crate::contract::{self, Family};
use crate::image::{Image, KERNEL_TEXT_END};
use crate::reference::md5;
use crate::reference::poly1305::{self, Limbs26};
use crate::variant::{Kernel, MD5_IMPL_COMPRESS, MD5_IMPL_COMPRESS_MB, POLY1305_PROCESS_BLOCKS};
use crate::vectors::{Body, Md5Call, Md5Expect, Md5Stub, Message, Poly1305Call, Poly1305Expect, Vector};

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

    /// The HotSpot stub this workload calls on an image of HotSpot's family.
    pub fn stub(&self) -> &'static str {
        match (self.kernel, self.single) {
            (Kernel::Md5, true) => MD5_IMPL_COMPRESS,
            (Kernel::Md5, false) => MD5_IMPL_COMPRESS_MB,
            (Kernel::Poly1305, _) => POLY1305_PROCESS_BLOCKS,
        }
    }

    /// The contract symbol this workload calls through `family`: the family's first contract
    /// of the kernel for a single MD5 block, its last otherwise (table order,
    /// [`contract::CONTRACTS`]): `md5_implCompress` / `md5_implCompressMB` for HotSpot,
    /// `md5_block_data_order` (num = 1 or n) for OpenSSL.
    pub fn stub_in(&self, family: Family) -> &'static str {
        let mut rows = contract::contracts(family, self.kernel).filter(|c| c.required());
        let row = if self.single { rows.next() } else { rows.last() };
        row.map_or_else(|| self.stub(), |c| c.symbol)
    }

    /// The contract family `image` runs this workload's kernel through (HotSpot's when it
    /// defines no complete family: planning then says what is missing).
    pub fn family_in(&self, image: &Image) -> Family {
        Stubs::of(image).family(self.kernel).unwrap_or(Family::HotSpot)
    }

    /// The contract symbol this workload calls on `image` ([`Workload::stub_in`] of its family).
    pub fn stub_of(&self, image: &Image) -> &'static str {
        self.stub_in(self.family_in(image))
    }

    /// Short label: `md5_implCompressMB x256`.
    pub fn label(&self) -> String {
        format!("{} x{}", self.stub(), self.blocks)
    }

    /// [`Workload::label`] naming the symbol called on `image`: `md5_block_data_order x256`.
    pub fn label_on(&self, image: &Image) -> String {
        format!("{} x{}", self.stub_of(image), self.blocks)
    }

    /// The guest code range `[start, end)` of the kernel's contract symbols in the image's
    /// family (MD5 through HotSpot: both stubs), from their `st_size`: where its own code is.
    ///
    /// # Errors
    /// No complete family, a missing symbol or one without a size (`.size` directive).
    pub fn code_range(kernel: Kernel, image: &Image) -> Result<(u64, u64), String> {
        let stubs = Stubs::of(image);
        let family = stubs.family(kernel).ok_or_else(|| stubs.missing(kernel).unwrap_or_default())?;
        let mut range = (u64::MAX, 0);
        for name in contract::contracts(family, kernel).filter(|c| c.required()).map(|c| c.symbol) {
            let s = image.entry(name).ok_or_else(|| format!("the image defines no {name}"))?;
            if s.size == 0 {
                return Err(format!("{name} has no size: add `.size {name}, . - {name}` to the source"));
            }
            range = (range.0.min(s.addr), range.1.max(s.addr + s.size));
        }
        Ok(range)
    }

    /// The guest code range `[start, end)` whose instructions count as the kernel's: all of the
    /// kernels' code ([`Image::kernel_code`]), so helpers the contract symbols call (an
    /// OpenSSL adapter's inner block function, a perlasm `__poly1305_mult`) are counted, and
    /// the driver's code is not. Instructions are attributed by the start of their translation
    /// block, and a call into the kernel starts a block.
    ///
    /// # Errors
    /// The image defines no complete contract family for `kernel`, has no kernel-code mark, or
    /// a contract symbol lies outside the kernels' `.text`.
    pub fn profile_range(kernel: Kernel, image: &Image) -> Result<(u64, u64), String> {
        let stubs = Stubs::of(image);
        let family = stubs.family(kernel).ok_or_else(|| stubs.missing(kernel).unwrap_or_default())?;
        let (start, end) = image.kernel_code().ok_or_else(|| {
            format!("{} has no {KERNEL_TEXT_END} mark: it was not built by this lab", image.path.display())
        })?;
        for c in contract::contracts(family, kernel).filter(|c| c.required()) {
            let s = image.entry(c.symbol).ok_or_else(|| format!("the image defines no {}", c.symbol))?;
            if !(start..end).contains(&s.addr) {
                return Err(format!(
                    "{} at {:#x} lies outside the kernels' .text ({start:#x}..{end:#x}): counting needs the \
                     kernel code in .text sections",
                    c.symbol, s.addr
                ));
            }
        }
        Ok((start, end))
    }

    /// The call as a call entry: random input, a random state (MD5) or a random accumulator
    /// within the contract bounds and a clamped random r (Poly1305), drawn from `rng`.
    pub fn vector(&self, rng: &mut impl RngExt) -> Vector {
        let input = Message::Bytes((0..self.bytes()).map(|_| rng.random()).collect());
        let body = match self.kernel {
            Kernel::Md5 => {
                let state = md5::state_from_bytes(&rng.random::<[u8; 16]>());
                let (stub, limit) = match self.single {
                    true => (Md5Stub::Compress, 0),
                    false => (Md5Stub::CompressMb, (self.blocks as i32 - 1) * 64),
                };
                Body::Md5Call(Md5Call { stub, state, input, ofs: 0, limit, expect: Md5Expect::default() })
            }
            Kernel::Poly1305 => {
                let acc =
                    Limbs26(std::array::from_fn(|i| rng.random_range(0..if i == 4 { 1u64 << 27 } else { 1 << 26 })));
                let r = poly1305::clamp_r(&rng.random());
                let lengths = vec![self.bytes() as i64];
                Body::Poly1305Call(Poly1305Call { acc, r, input, lengths, expect: Poly1305Expect::default() })
            }
        };
        Vector { index: 0, name: self.label(), source: "lab bench".into(), offsets: vec![self.misalign], body }
    }

    /// Plans the call into `b` the way `lab run` plans a call entry ([`crate::cases`]): the input
    /// `misalign` bytes past a 64-byte boundary, and what the reference says the call must
    /// leave, for [`crate::cases::verdict::check`]. Returns the one-call case; its call is the
    /// batch's last.
    pub fn plan(&self, b: &mut BatchBuilder, stubs: &Stubs, rng: &mut impl RngExt) -> CasePlan {
        let v = self.vector(rng);
        let plan = CaseRun::new(&v, "bench", &v.name, Layout::Offset(self.misalign)).plan_next(b, stubs, rng);
        plan
    }
}
