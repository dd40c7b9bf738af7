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
use rand::RngExt;

use crate::batch::{Arg, BufId};
use crate::cases::plan::{
    Expect, Final, Md5Args, Planner, MD5_INSTRUCTIONS_PER_BLOCK, POLY1305_INSTRUCTIONS_PER_BLOCK,
};
use crate::contract::{MD5_BLOCK_DATA_ORDER, POLY1305_BLOCKS, POLY1305_OPAQUE_BYTES};
use crate::reference::md5::{self, State};
use crate::reference::openssl::{self, PolyCtx};
use crate::reference::poly1305::{self, Limbs26};
use crate::variant::{Arch, Kernel};
use crate::vectors::{self, Md5Expect, Md5Stub, Message};

use crate::cases::openssl_checks::{h_of, limbs_of, r128, OsslExpect, OsslFinal};

impl<R: RngExt> Planner<'_, R> {
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
        let args = [Arg::Ptr(out, 0), c.buf, Arg::Imm(num as u64), Arg::Imm(self.rng.random())];
        let func = self.e.md5_block_data_order.unwrap_or_default();
        self.call(func, args, prev, out, format!("{MD5_BLOCK_DATA_ORDER}(num={num}){}", c.note), expects);
        out
    }

    /// The context a Poly1305 chain starts from when no kernel output is carried in: h = `acc`
    /// reduced mod p, the clamped key `r`. Through `poly1305_init` (the image defines it) a
    /// chain from h = 0 starts with an init call: empty bytes say so
    /// ([`Planner::openssl_poly_chain`]); another h is laid in the scalar layout, as init and
    /// earlier scalar `blocks` calls leave it, in the opaque context's bytes.
    pub(crate) fn openssl_poly_ctx(&self, acc: &Limbs26, r: &Limbs26) -> Vec<u8> {
        let mut ctx = PolyCtx::of(self.arch()).with(h_of(acc), r128(r));
        if let Some(p) = &self.e.poly1305_path {
            // A path with a layout of its own cannot start from a given h: from init, h = 0.
            if acc.reduced() == BigUint::default() || !p.scalar_form {
                return Vec::new();
            }
            ctx.resize(POLY1305_OPAQUE_BYTES, 0);
            // What init leaves after the scalar words (armv8's "power table not computed").
            if let Some(tail) = &p.init_tail {
                let at = ctx.len() - tail.len();
                ctx[at..].copy_from_slice(tail);
            }
        }
        ctx
    }

    /// Bytes of the context buffers: the opaque context through `poly1305_init`, the scalar
    /// layout otherwise.
    fn poly_ctx_bytes(&self) -> usize {
        match self.e.poly1305_path {
            Some(_) => POLY1305_OPAQUE_BYTES,
            None => PolyCtx::of(self.arch()).bytes,
        }
    }

    /// The `blocks` function calls go to and its name for labels: init's `func.blocks`, or
    /// the `poly1305_blocks` symbol.
    fn poly_blocks(&self) -> (u64, String) {
        match &self.e.poly1305_path {
            Some(p) => (p.blocks, p.blocks_name.clone()),
            None => (self.e.poly1305_blocks.unwrap_or_default(), POLY1305_BLOCKS.to_owned()),
        }
    }

    /// The `len` argument of a `blocks` call and the `int` arguments (position, name) the
    /// call passes: `padbit` always, and `len` where Linux's glue declares it `u32` (arm64).
    fn poly_len(&mut self, len: u64) -> (Arg, Vec<(usize, &'static str)>) {
        let u32_len = self.e.poly1305_path.as_ref().and_then(|p| p.glue).is_some_and(|g| g.len_is_32_bit());
        match u32_len {
            true => (self.int(Kernel::Poly1305, len as i32), vec![(2, "len"), (3, "padbit")]),
            false => (Arg::Imm(len), vec![(3, "padbit")]),
        }
    }

    /// Expectations on a context after a `blocks` call: as they are for the scalar layout,
    /// judged only while the context is scalar on the `poly1305_init` path, and never on a
    /// path whose init leaves a layout of its own (the tag judges those).
    fn poly_expect(&self, ctx: BufId, e: OsslExpect) -> Expect {
        let arch = self.arch();
        Expect::OpenSsl(match &self.e.poly1305_path {
            Some(p) if !p.scalar_form => OsslExpect::Output { buf: ctx },
            Some(_) => OsslExpect::WhileScalar { ctx, arch, inner: Box::new(e) },
            None => e,
        })
    }

    /// `poly1305_emit(ctx, mac, 0)` after the `blocks` call labelled `after`, checking the low
    /// 128 bits of h mod p (`acc`): how h is judged on a path with a layout of its own.
    fn openssl_poly_emit_of_h(&mut self, ctx: BufId, acc: &Limbs26, after: &str) {
        let Some(path) = self.e.poly1305_path.clone() else { return };
        let h = h_of(acc);
        let want = (u128::from(h[0]) | u128::from(h[1]) << 64).to_le_bytes();
        // One buffer for both (a batch of long chains holds many of these): the zero nonce in
        // bytes 0-15, the tag in 16-31, flush against the guard page.
        let mut both = [0u8; 32];
        both[16..].fill(0x3c);
        let mac = self.output("mac", &both);
        let args = [Arg::Ptr(ctx, 0), Arg::Ptr(mac, 16), Arg::Ptr(mac, 0), Arg::Imm(self.rng.random())];
        let label = format!("{}(ctx, mac, nonce=0) after {after}", path.emit_name);
        self.call_plain(path.emit, args, label, vec![Expect::OpenSsl(OsslExpect::EmitOfH { mac, want })]);
    }

    /// `poly1305_init(ctx, key, func)` into a fresh opaque context filled with a pattern (init
    /// must write what it needs); returns the context.
    fn openssl_poly_init(&mut self, r: &Limbs26) -> BufId {
        let Some(path) = self.e.poly1305_path.clone() else { return self.output("ctx", &[]) };
        let r = r128(r);
        let mut key = r.to_le_bytes().to_vec();
        key.extend(self.rng.random::<[u8; 16]>());
        let key = self.input("key", &key, 1);
        let ctx = self.output("ctx", &[0xa5; POLY1305_OPAQUE_BYTES]);
        let func = self.output("func", &[0x5a; 16]);
        let want = path.via_func.then_some([path.blocks, path.emit]);
        let names = [path.blocks_name.clone(), path.emit_name.clone()];
        let e = OsslExpect::Init { ctx, func, arch: self.arch(), r, want, names, layout: path.scalar_form };
        let args = [Arg::Ptr(ctx, 0), Arg::Ptr(key, 0), Arg::Ptr(func, 0), Arg::Imm(self.rng.random())];
        let note = path.probe_error.map_or_else(String::new, |e| format!(" (the lab's probe: {e})"));
        self.call_plain(path.init, args, format!("{}{note}", path.init_call), vec![Expect::OpenSsl(e)]);
        ctx
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
        let key = key_part(layout, &r);
        let own_layout = self.e.poly1305_path.as_ref().is_some_and(|p| !p.scalar_form);
        let mut expect = expect;
        if init.is_empty() && own_layout {
            // From init (h = 0), not the entry's accumulator: its expect_acc no longer applies.
            *acc = Limbs26::default();
            expect = None;
        }
        let mut prev = if init.is_empty() { self.openssl_poly_init(&r) } else { self.output("ctx", init) };
        let (func, name) = self.poly_blocks();
        let wide = crate::domain::current() == crate::domain::Domain::Wide;
        let mut off = 0;
        for (i, &len) in lengths.iter().enumerate() {
            let out = self.output("ctx", &vec![0u8; self.poly_ctx_bytes()]);
            let take = vectors::whole_blocks(len) * 16;
            self.instructions = self.instructions.max((take / 16) as u64 * POLY1305_INSTRUCTIONS_PER_BLOCK);
            let chunk = bytes.get(off..off + take).unwrap_or_default();
            let mut expects = match openssl::poly1305_blocks(h_of(acc), r128(&r), chunk, padbit) {
                None => vec![Expect::OpenSsl(OsslExpect::Unchanged { ctx: out, before: prev })],
                Some(h) => {
                    *acc = limbs_of(h);
                    vec![self.poly_expect(out, OsslExpect::PolyH { ctx: out, arch, want: h, file: false })]
                }
            };
            let what = "the key part of the context (r and what follows h)";
            expects.push(self.poly_expect(out, OsslExpect::Kept { buf: out, at: 24, bytes: key.clone(), what }));
            if i + 1 == lengths.len() {
                let want = |v: &BigUint| openssl::words(&(v % poly1305::p()));
                let file = expect.map(|v| OsslExpect::PolyH { ctx: out, arch, want: want(v), file: true });
                expects.extend(file.map(|f| self.poly_expect(out, f)));
            }
            // OpenSSL's callers pass whole blocks only (`Poly1305_Update` keeps the tail): a
            // vector's `length` becomes its whole blocks, unless `--domain wide` asks for the
            // length as given (outside the contract: reported apart, crate::domain).
            let len_arg = if wide && len > 0 { len as u64 } else { take as u64 };
            let (len, ints) = self.poly_len(len_arg);
            let args = [Arg::Ptr(out, 0), Arg::Ptr(input, off), len, self.int(Kernel::Poly1305, padbit as i32)];
            let label = format!("{name}(inp+{}, len={len_arg}, padbit={padbit})", at + off);
            self.call(func, args, prev, out, label.clone(), expects);
            // On the blocks call, before the emit that judges an own layout's h follows it.
            if let Some(last) = self.calls.last_mut() {
                last.ints = ints;
            }
            if own_layout {
                self.openssl_poly_emit_of_h(out, acc, &label);
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
        let Some(path) = self.e.poly1305_path.clone() else {
            return (last, Final::OpenSsl(OsslFinal::Emit { ctx: last, arch: self.arch(), nonce: s, tag, what }));
        };
        // The image's own emit: `poly1305_emit(ctx, mac, nonce)` through init's pointer.
        let nonce = self.input("nonce", &s, 1);
        let mac = self.output("mac", &[0x3c; 16]);
        let args = [Arg::Ptr(last, 0), Arg::Ptr(mac, 0), Arg::Ptr(nonce, 0), Arg::Imm(self.rng.random())];
        let label = format!("{}(ctx, mac, nonce)", path.emit_name);
        self.call_plain(path.emit, args, label, vec![Expect::OpenSsl(OsslExpect::Output { buf: mac })]);
        (mac, Final::OpenSsl(OsslFinal::Mac { mac, tag, what }))
    }

    /// One `poly1305_blocks(ctx, block, 16, 0)` call after `prev`.
    fn openssl_poly_tail(&mut self, prev: BufId, acc: &mut Limbs26, r: Limbs26, block: &Message) -> BufId {
        let (arch, layout) = (self.arch(), PolyCtx::of(self.arch()));
        let bytes = block.to_vec();
        let input = self.input("tail", &bytes, 0);
        let out = self.output("ctx", &vec![0u8; self.poly_ctx_bytes()]);
        let h = openssl::poly1305_blocks(h_of(acc), r128(&r), &bytes, 0).unwrap_or_default();
        *acc = limbs_of(h);
        let key = key_part(layout, &r);
        let what = "the key part of the context (r and what follows h)";
        let expects = vec![
            self.poly_expect(out, OsslExpect::PolyH { ctx: out, arch, want: h, file: false }),
            self.poly_expect(out, OsslExpect::Kept { buf: out, at: 24, bytes: key, what }),
        ];
        let (len, ints) = self.poly_len(16);
        let args = [Arg::Ptr(out, 0), Arg::Ptr(input, 0), len, self.int(Kernel::Poly1305, 0)];
        let (func, name) = self.poly_blocks();
        self.call(func, args, prev, out, format!("{name}(padded tail, len=16, padbit=0)"), expects);
        if let Some(last) = self.calls.last_mut() {
            last.ints = ints;
        }
        out
    }
}

/// The bytes after h that every `blocks` call keeps (from byte 24): r, and s1 where the layout
/// has it, with what lies between. Not a later word (riscv64's `top_power` at 48, which an
/// init built without RVV, cryptogams' default, leaves unwritten): the tag judges those.
fn key_part(layout: &PolyCtx, r: &Limbs26) -> Vec<u8> {
    let end = (layout.r_at + 16).max(layout.s1_at.map_or(0, |a| a + 8));
    let mut key = layout.with([0; 3], r128(r)).split_off(24);
    key.truncate(end.saturating_sub(24));
    key
}
