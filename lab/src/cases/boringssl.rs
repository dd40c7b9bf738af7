//! Planning calls through BoringSSL's MD5 block function ([`crate::contract`] family
//! `boringssl`): `md5_block_asm_data_order(uint32_t *state, const uint8_t *data, size_t num)`
//! (BoringSSL crypto/md5/internal.h). The vectors are the ones HotSpot's stubs run: an
//! `implCompress` is `num = 1`, an `implCompressMB(ofs, limit)` the blocks its loop takes. The
//! state is a bare `uint32_t[4]`, laid out as 16 bytes flush against a guard page in the
//! guarded cases, so a kernel writing an `MD5_CTX`'s fields after A..D is caught as a write
//! past the end of `state`.

use rand::RngExt;

use crate::batch::{Arg, BufId};
use crate::cases::plan::{Expect, Md5Args, Planner, MD5_INSTRUCTIONS_PER_BLOCK};
use crate::contract::MD5_BLOCK_ASM_DATA_ORDER;
use crate::reference::md5::{self, State};
use crate::reference::openssl;
use crate::vectors::{Md5Expect, Md5Stub};

impl<R: RngExt> Planner<'_, R> {
    /// One `md5_block_asm_data_order` call standing for the HotSpot call `c` on the 16-byte
    /// state after `prev`; returns the state buffer.
    pub(crate) fn boringssl_md5_step(&mut self, c: Md5Args, prev: BufId, state: &mut State, file: &Md5Expect) -> BufId {
        let num = match c.stub {
            Md5Stub::Compress => 1,
            Md5Stub::CompressMb => md5::mb_blocks(c.ofs, c.limit),
        };
        self.instructions = self.instructions.max(num as u64 * MD5_INSTRUCTIONS_PER_BLOCK);
        let out = self.output("state", &[0u8; 16]);
        let mut expects = match openssl::md5_block_data_order(state, c.input, num) {
            Some(()) => vec![Expect::Md5State(out, *state)],
            None => vec![Expect::Unplanned(format!("the reference had {} bytes for this call", c.input.len()))],
        };
        expects.extend(file.state.map(|s| Expect::Md5StateFile(out, s)));
        let args = [Arg::Ptr(out, 0), c.buf, Arg::Imm(num as u64), Arg::Imm(self.rng.random())];
        let func = self.e.md5_block_asm_data_order.unwrap_or_default();
        self.call(func, args, prev, out, format!("{MD5_BLOCK_ASM_DATA_ORDER}(num={num}){}", c.note), expects);
        out
    }
}
