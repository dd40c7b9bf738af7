//! Planning and checking calls through OpenSSL's block functions ([`crate::contract`] family
//! `openssl`): the published vectors and fuzz cases are the same ones HotSpot's stubs run;
//! this module turns each of their calls into the OpenSSL shape.
//!
//! - MD5: a HotSpot `implCompress` is `md5_block_data_order(c, buf, 1)`, an
//!   `implCompressMB(buf, state, ofs, limit)` is `md5_block_data_order(c, buf, blocks)` with
//!   the blocks the `ofs..=limit` loop takes; `c` is a whole `MD5_CTX` whose bytes after A..D
//!   must stay as the lab wrote them.
//! - Poly1305: a `processBlocks(input, length, ...)` call is `poly1305_blocks(ctx, input,
//!   length, 1)` on the base 2^64 context of the architecture; a tag's tail goes through the
//!   kernel as OpenSSL's `Poly1305_Final` passes it (padded with 0x01 and zeros, padbit 0),
//!   and the tag is that architecture's `poly1305_emit` of the kernel's h.

use num_bigint::BigUint;
use rand::Rng;

use crate::batch::{Arg, Batch, BufId};
use crate::cases::plan::{
    Expect, Final, Md5Args, Planner, MD5_INSTRUCTIONS_PER_BLOCK, POLY1305_INSTRUCTIONS_PER_BLOCK,
};
use crate::contract::{MD5_BLOCK_DATA_ORDER, POLY1305_BLOCKS};
use crate::finding::{Class, Finding};
use crate::reference::md5::{self, State};
use crate::reference::openssl::{self, PolyCtx, H64};
use crate::reference::poly1305::{self, ClampedR, Fixed130, Limbs26};
use crate::variant::Arch;
use crate::vectors::{self, Md5Expect, Md5Stub, Message};

/// What one OpenSSL-contract call must leave behind, beyond the HotSpot expectations it shares.
#[derive(Debug, Clone)]
pub(crate) enum OsslExpect {
    /// Bytes `at..` of `buf` are exactly `bytes` (the parts of a context the call must not write).
    Kept { buf: BufId, at: usize, bytes: Vec<u8>, what: &'static str },
    /// The whole context is what it was before the call (`len` had no whole block).
    Unchanged { ctx: BufId, before: BufId },
    /// h of the context is congruent to `want` (fully reduced) mod 2^130-5, and the
    /// architecture's `poly1305_emit` reduces it exactly; `file`: `want` is the vector file's
    /// `expect_acc`.
    PolyH { ctx: BufId, arch: Arch, want: H64, file: bool },
}

impl OsslExpect {
    /// The buffer whose bytes the check reads (for [`crate::cases::verdict::outputs_digest`]).
    pub(crate) fn buffer(&self) -> BufId {
        match self {
            OsslExpect::Kept { buf, .. } => *buf,
            OsslExpect::Unchanged { ctx, .. } | OsslExpect::PolyH { ctx, .. } => *ctx,
        }
    }

    /// The finding, if the call broke this expectation.
    pub(crate) fn finding(&self, label: &str, batch: &Batch, resp: &[u8]) -> Option<Finding> {
        match self {
            OsslExpect::Kept { buf, at, bytes, what } => {
                let got = batch.buffer(resp, *buf).get(*at..).unwrap_or_default();
                let first = got.iter().zip(bytes).position(|(g, w)| g != w)?;
                Some(Finding::new(
                    Class::Memory,
                    format!(
                        "{label}: wrote {what}: byte {} of the context is {:#04x}, must stay {:#04x}",
                        at + first,
                        got[first],
                        bytes[first]
                    ),
                ))
            }
            OsslExpect::Unchanged { ctx, before } => {
                let (b, g) = (batch.buffer(resp, *before), batch.buffer(resp, *ctx));
                (b != g).then(|| {
                    Finding::new(
                        Class::Value,
                        format!(
                            "{label}: ctx must be untouched when len has no whole block: h was {}, now {}",
                            hex_h(PolyCtx::h(b)),
                            hex_h(PolyCtx::h(g))
                        ),
                    )
                })
            }
            OsslExpect::PolyH { ctx, arch, want, file } => {
                let h = PolyCtx::h(batch.buffer(resp, *ctx));
                let got = openssl::reduced(h);
                let src = if *file { " (expect_acc in the file)" } else { "" };
                if got != *want {
                    Some(Finding::new(
                        Class::Value,
                        format!(
                            "{label}: h mod 2^130-5 expected {}{src}, got {} (h {})",
                            hex_value(*want),
                            hex_value(got),
                            hex_h(h)
                        ),
                    ))
                } else if !PolyCtx::of(*arch).emit_exact(h) {
                    Some(Finding::new(
                        Class::Bounds,
                        format!(
                            "{label}: h {} is not reduced enough for {arch}'s poly1305_emit ({})",
                            hex_h(h),
                            PolyCtx::of(*arch).source
                        ),
                    ))
                } else {
                    None
                }
            }
        }
    }
}

/// The last check of an OpenSSL-contract case.
#[derive(Debug, Clone)]
pub(crate) enum OsslFinal {
    /// `poly1305_emit(ctx, mac, nonce)` of the architecture on the kernel's h gives `tag`.
    Emit { ctx: BufId, arch: Arch, nonce: [u8; 16], tag: [u8; 16], what: String },
}

impl OsslFinal {
    /// The finding, if the case's result is wrong.
    pub(crate) fn finding(&self, batch: &Batch, resp: &[u8]) -> Option<Finding> {
        let OsslFinal::Emit { ctx, arch, nonce, tag, what } = self;
        let got = PolyCtx::of(*arch).emit(PolyCtx::h(batch.buffer(resp, *ctx)), nonce);
        (got != *tag).then(|| {
            Finding::new(Class::Value, format!("{what}expected {}, got {}", hex::encode(tag), hex::encode(got)))
        })
    }

    /// The tag this final check computes from a context (for a MAC of MACs' outer message).
    pub(crate) fn tag_of(arch: Arch, ctx: &[u8], nonce: &[u8; 16]) -> [u8; 16] {
        PolyCtx::of(arch).emit(PolyCtx::h(ctx), nonce)
    }
}

fn hex_h(h: H64) -> String {
    format!("[{:016x} {:016x} {:016x}]", h[0], h[1], h[2])
}

/// h0 + h1·2^64 + h2·2^128 in hex without leading zeros (`0x1f`).
fn hex_value(h: H64) -> String {
    match h {
        [l, 0, 0] => format!("{l:#x}"),
        [l, m, 0] => format!("{m:#x}{l:016x}"),
        [l, m, t] => format!("{t:#x}{m:016x}{l:016x}"),
    }
}

/// r of 26-bit limbs as the 128-bit clamped key (big integers only for limbs outside the
/// contract, which the lab never plans).
fn r128(r: &Limbs26) -> u128 {
    ClampedR::from_limbs(r).map_or_else(
        || {
            let w = openssl::words(&r.value());
            u128::from(w[0]) | (u128::from(w[1]) << 64)
        },
        |c| c.value(),
    )
}

/// The 26-bit limbs of `acc` as h of a base 2^64 context, reduced mod p.
fn h_of(acc: &Limbs26) -> H64 {
    Fixed130::from_limbs(acc).map_or_else(|| openssl::words(&acc.reduced()), |f| f.reduced().words())
}

/// h (any words) as 26-bit limbs of its value mod p.
fn limbs_of(h: H64) -> Limbs26 {
    Fixed130::from_words(h).reduced().to_limbs()
}

impl<R: Rng> Planner<'_, R> {
    fn arch(&self) -> Arch {
        self.b.abi().arch
    }

    /// A fresh `MD5_CTX` holding `state` (the rest: [`openssl::md5_ctx_tail`]).
    pub(crate) fn openssl_md5_ctx(&mut self, state: &[u8; 16]) -> BufId {
        self.output("ctx", &openssl::md5_ctx(state))
    }

    /// One `md5_block_data_order` call standing for the HotSpot call `c`; returns the context.
    pub(crate) fn openssl_md5_step(&mut self, c: Md5Args, prev: BufId, state: &mut State, file: &Md5Expect) -> BufId {
        let num = match c.stub {
            Md5Stub::Compress => 1,
            Md5Stub::CompressMb => md5::mb_blocks(c.ofs, c.limit),
        };
        self.instructions = self.instructions.max(num as u64 * MD5_INSTRUCTIONS_PER_BLOCK);
        let out = self.output("ctx", &[0u8; openssl::MD5_CTX_BYTES]);
        let mut expects = match openssl::md5_block_data_order(state, c.input, num) {
            Some(()) => vec![Expect::Md5State(out, *state)],
            None => vec![Expect::Unplanned(format!("the reference had {} bytes for this call", c.input.len()))],
        };
        let tail = openssl::md5_ctx_tail().to_vec();
        let what = "MD5_CTX past A..D (Nl, Nh, data, num)";
        expects.push(Expect::OpenSsl(OsslExpect::Kept { buf: out, at: 16, bytes: tail, what }));
        expects.extend(file.state.map(|s| Expect::Md5StateFile(out, s)));
        let args = [Arg::Ptr(out, 0), c.buf, Arg::Imm(num as u64), Arg::Imm(self.rng.gen())];
        let func = self.e.md5_block_data_order.unwrap_or_default();
        self.call(func, args, prev, out, format!("{MD5_BLOCK_DATA_ORDER}(num={num}){}", c.note), expects);
        out
    }

    /// The context a Poly1305 chain starts from when no kernel output is carried in: h = `acc`
    /// reduced mod p, the clamped key `r`.
    pub(crate) fn openssl_poly_ctx(&self, acc: &Limbs26, r: &Limbs26) -> Vec<u8> {
        PolyCtx::of(self.arch()).with(h_of(acc), r128(r))
    }

    /// `poly1305_blocks` calls with the given `len` arguments and `padbit` over `msg` from byte
    /// `at`, each starting from a copy of the previous context (the first from `init`); the
    /// reference's h is `acc`. Returns the last context.
    #[allow(clippy::too_many_arguments)] // one call chain's inputs, as in poly1305_chain
    pub(crate) fn openssl_poly_chain(
        &mut self,
        init: &[u8],
        acc: &mut Limbs26,
        r: Limbs26,
        msg: &Message,
        at: usize,
        lengths: &[i64],
        expect: Option<&BigUint>,
        padbit: u32,
    ) -> BufId {
        let (arch, layout) = (self.arch(), PolyCtx::of(self.arch()));
        let used: usize = lengths.iter().map(|&l| vectors::whole_blocks(l) * 16).sum();
        let bytes = msg.read(at, used);
        let input = self.input("input", &bytes, 0);
        let key = layout.with([0; 3], r128(&r)).split_off(24);
        let mut prev = self.output("ctx", init);
        let mut off = 0;
        for (i, &len) in lengths.iter().enumerate() {
            let out = self.output("ctx", &vec![0u8; layout.bytes]);
            let take = vectors::whole_blocks(len) * 16;
            self.instructions = self.instructions.max((take / 16) as u64 * POLY1305_INSTRUCTIONS_PER_BLOCK);
            let chunk = bytes.get(off..off + take).unwrap_or_default();
            let mut expects = match openssl::poly1305_blocks(h_of(acc), r128(&r), chunk, padbit) {
                None => vec![Expect::OpenSsl(OsslExpect::Unchanged { ctx: out, before: prev })],
                Some(h) => {
                    *acc = limbs_of(h);
                    vec![Expect::OpenSsl(OsslExpect::PolyH { ctx: out, arch, want: h, file: false })]
                }
            };
            let what = "the key part of the context (r and what follows h)";
            expects.push(Expect::OpenSsl(OsslExpect::Kept { buf: out, at: 24, bytes: key.clone(), what }));
            if i + 1 == lengths.len() {
                let want = |v: &BigUint| openssl::words(&(v % poly1305::p()));
                let file = expect.map(|v| OsslExpect::PolyH { ctx: out, arch, want: want(v), file: true });
                expects.extend(file.map(Expect::OpenSsl));
            }
            let len_arg = len.max(0) as u64;
            let args = [Arg::Ptr(out, 0), Arg::Ptr(input, off), Arg::Imm(len_arg), self.int(padbit as i32)];
            let label = format!("{POLY1305_BLOCKS}(inp+{}, len={len_arg}, padbit={padbit})", at + off);
            let func = self.e.poly1305_blocks.unwrap_or_default();
            self.call(func, args, prev, out, label, expects);
            if let Some(last) = self.calls.last_mut() {
                last.ints = vec![(3, "padbit")];
            }
            prev = out;
            off += take;
        }
        prev
    }

    /// The end of a tag through OpenSSL's contract: the tail (if any) padded as
    /// `Poly1305_Final` does and passed with padbit 0, then `poly1305_emit` with `s`. Returns
    /// the last context and the final check.
    #[allow(clippy::too_many_arguments)] // a tag's parts, as in poly1305_finish
    pub(crate) fn openssl_poly_finish(
        &mut self,
        ctx: BufId,
        acc: &mut Limbs26,
        r: Limbs26,
        tail: &[u8],
        s: [u8; 16],
        tag: [u8; 16],
        what: String,
    ) -> (BufId, Final) {
        let last = if tail.is_empty() {
            ctx
        } else {
            let block = Message::Bytes(openssl::padded_tail(tail).to_vec());
            // A context buffer copied from the kernel's: the chain starts from `ctx` itself.
            self.openssl_poly_tail(ctx, acc, r, &block)
        };
        (last, Final::OpenSsl(OsslFinal::Emit { ctx: last, arch: self.arch(), nonce: s, tag, what }))
    }

    /// One `poly1305_blocks(ctx, block, 16, 0)` call after `prev`.
    fn openssl_poly_tail(&mut self, prev: BufId, acc: &mut Limbs26, r: Limbs26, block: &Message) -> BufId {
        let (arch, layout) = (self.arch(), PolyCtx::of(self.arch()));
        let bytes = block.to_vec();
        let input = self.input("tail", &bytes, 0);
        let out = self.output("ctx", &vec![0u8; layout.bytes]);
        let h = openssl::poly1305_blocks(h_of(acc), r128(&r), &bytes, 0).unwrap_or_default();
        *acc = limbs_of(h);
        let key = layout.with([0; 3], r128(&r)).split_off(24);
        let what = "the key part of the context (r and what follows h)";
        let expects = vec![
            Expect::OpenSsl(OsslExpect::PolyH { ctx: out, arch, want: h, file: false }),
            Expect::OpenSsl(OsslExpect::Kept { buf: out, at: 24, bytes: key, what }),
        ];
        let args = [Arg::Ptr(out, 0), Arg::Ptr(input, 0), Arg::Imm(16), self.int(0)];
        let func = self.e.poly1305_blocks.unwrap_or_default();
        self.call(func, args, prev, out, format!("{POLY1305_BLOCKS}(padded tail, len=16, padbit=0)"), expects);
        if let Some(last) = self.calls.last_mut() {
            last.ints = vec![(3, "padbit")];
        }
        out
    }
}
