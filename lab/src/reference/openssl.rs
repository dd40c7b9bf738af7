//! OpenSSL's block-function contexts and the reference for what its block functions compute.
//!
//! MD5: `MD5_CTX` (include/openssl/md5.h) is `MD5_LONG A, B, C, D, Nl, Nh, data[16]; unsigned
//! int num;` with 32-bit `MD5_LONG`: 92 bytes, the chaining state A..D in its first 16.
//! `md5_block_data_order(c, p, num)` compresses `num` 64-byte blocks into A..D
//! ([`crate::reference::md5::compress`] each) and touches nothing else of the context.
//!
//! Poly1305: the scalar base 2^64 context of `poly1305_init`/`poly1305_blocks`/`poly1305_emit`
//! (crypto/poly1305/poly1305.c for C builds; asm/poly1305-{x86_64,armv8,riscv64}.pl) starts
//! with the hash `h0, h1, h2` (64-bit words: h = h0 + h1·2^64 + h2·2^128, partially reduced)
//! followed, per architecture, by the clamped key `r0, r1` and what the assembly keeps beside
//! it ([`PolyCtx`]). `poly1305_blocks(ctx, inp, len, padbit)` takes the whole 16-byte blocks
//! of `len`: h = (h + block + padbit·2^128)·r mod 2^130-5 each; `poly1305_emit(ctx, mac,
//! nonce)` reduces h and adds the nonce (the key's s) mod 2^128.

use num_bigint::BigUint;

use crate::reference::md5::State;
use crate::reference::poly1305::{self, CLAMP};
use crate::variant::Arch;

/// Bytes of `MD5_CTX`: 23 32-bit words.
pub const MD5_CTX_BYTES: usize = 92;

/// The bytes of an `MD5_CTX` after the chaining state (Nl, Nh, data, num): the lab fills them
/// with this pattern and checks that a call leaves it.
pub fn md5_ctx_tail() -> [u8; MD5_CTX_BYTES - 16] {
    std::array::from_fn(|i| (i as u8).wrapping_mul(0x9d).wrapping_add(0x5b))
}

/// An `MD5_CTX` holding `state` and [`md5_ctx_tail`].
pub fn md5_ctx(state: &[u8; 16]) -> Vec<u8> {
    let mut c = state.to_vec();
    c.extend_from_slice(&md5_ctx_tail());
    c
}

/// `md5_block_data_order`: `num` blocks of `p` into `state`. `None` when `p` is short (a lab bug).
pub fn md5_block_data_order(state: &mut State, p: &[u8], num: usize) -> Option<()> {
    let blocks = p.get(..num.checked_mul(64)?)?;
    blocks.chunks_exact(64).for_each(|b| crate::reference::md5::compress(state, b));
    Some(())
}

/// How an architecture's `poly1305_emit` reduces h before adding the nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitReduction {
    /// g = h + 5; if g reaches 2^130 (bits above 129 of g2 set) take g: exact for h < 2·p.
    /// x86_64 and armv8 (`poly1305_emit`).
    Compare,
    /// First folds h2's bits above 1 back (h2 = (h2 & 3) + 5·(h2 >> 2) into h0), then as
    /// [`EmitReduction::Compare`]: riscv64, whose `poly1305_blocks` leaves h2 unreduced.
    FoldThenCompare,
}

/// One architecture's scalar context: where `r` lives and what else `poly1305_blocks` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolyCtx {
    /// The architecture.
    pub arch: Arch,
    /// Bytes the lab lays out (the scalar code's whole view of the context).
    pub bytes: usize,
    /// Offset of r0 (r1 follows).
    pub r_at: usize,
    /// Offset of the precomputed s1 = r1 + (r1 >> 2), when `poly1305_init` stores it.
    pub s1_at: Option<usize>,
    /// `poly1305_emit`'s reduction.
    pub emit: EmitReduction,
    /// Where the layout is read from.
    pub source: &'static str,
}

/// The scalar contexts, one per architecture.
pub const POLY_CTXS: [PolyCtx; 3] = [
    PolyCtx {
        arch: Arch::Riscv64,
        bytes: 56,
        r_at: 24,
        s1_at: Some(40),
        emit: EmitReduction::FoldThenCompare,
        source: "poly1305-riscv64.pl: h[3] at 0, r0 24, r1 32, s1 40, top_power (u32) 48",
    },
    PolyCtx {
        arch: Arch::Aarch64,
        bytes: 48,
        r_at: 32,
        s1_at: None,
        emit: EmitReduction::Compare,
        source: "poly1305-armv8.pl: h[3] at 0, is_base2_26 24 (0: base 2^64), r0 32, r1 40",
    },
    PolyCtx {
        arch: Arch::X86_64,
        bytes: 40,
        r_at: 24,
        s1_at: None,
        emit: EmitReduction::Compare,
        source: "poly1305-x86_64.pl: h[3] at 0 (is_base2_26 = upper half of h2 for AVX), r0 24, r1 32",
    },
];

/// h as three 64-bit words.
pub type H64 = [u64; 3];

impl PolyCtx {
    /// The context layout of `arch`.
    pub fn of(arch: Arch) -> &'static PolyCtx {
        POLY_CTXS.iter().find(|c| c.arch == arch).unwrap_or(&POLY_CTXS[0])
    }

    /// A context holding `h` and the clamped key `r` (what `poly1305_init` and earlier
    /// `poly1305_blocks` calls leave); everything else zero.
    pub fn with(&self, h: H64, r: u128) -> Vec<u8> {
        let mut c = vec![0u8; self.bytes];
        for (i, w) in h.iter().enumerate() {
            c[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        let (r0, r1) = (r as u64, (r >> 64) as u64);
        c[self.r_at..self.r_at + 8].copy_from_slice(&r0.to_le_bytes());
        c[self.r_at + 8..self.r_at + 16].copy_from_slice(&r1.to_le_bytes());
        if let Some(at) = self.s1_at {
            c[at..at + 8].copy_from_slice(&(r1 + (r1 >> 2)).to_le_bytes());
        }
        c
    }

    /// `poly1305_init(ctx, key)`: h = 0, r = the first 16 key bytes clamped.
    pub fn init(&self, key_r: &[u8; 16]) -> Vec<u8> {
        self.with([0; 3], u128::from_le_bytes(*key_r) & CLAMP)
    }

    /// h of a context (zero words where it is short).
    pub fn h(ctx: &[u8]) -> H64 {
        std::array::from_fn(|i| {
            ctx.get(8 * i..8 * i + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        })
    }

    /// `poly1305_emit` of this architecture on `h` with `nonce` (s): the 16-byte tag.
    pub fn emit(&self, h: H64, nonce: &[u8; 16]) -> [u8; 16] {
        let mut v = value(h);
        if self.emit == EmitReduction::FoldThenCompare {
            v = BigUint::from(h[0]) + (BigUint::from(h[1]) << 64u32) + (BigUint::from(h[2] & 3) << 128u32);
            v += BigUint::from(h[2] >> 2) * 5u32;
        }
        let g = &v + 5u32;
        if g.bits() > 130 {
            v = g;
        }
        low128(v + BigUint::from_bytes_le(nonce))
    }

    /// Whether this architecture's `poly1305_emit` turns `h` into the right tag: its final
    /// reduction is exact for h (e.g. h < 2·(2^130 - 5) for [`EmitReduction::Compare`]).
    pub fn emit_exact(&self, h: H64) -> bool {
        self.emit(h, &[0; 16]) == low128(value(h) % poly1305::p())
    }
}

/// h = h0 + h1·2^64 + h2·2^128.
pub fn value(h: H64) -> BigUint {
    BigUint::from(h[0]) + (BigUint::from(h[1]) << 64u32) + (BigUint::from(h[2]) << 128u32)
}

/// The words of `v` (below 2^192).
pub fn words(v: &BigUint) -> H64 {
    let d: Vec<u64> = v.iter_u64_digits().collect();
    std::array::from_fn(|i| d.get(i).copied().unwrap_or(0))
}

fn low128(v: BigUint) -> [u8; 16] {
    let mut out = [0u8; 16];
    let b = v.to_bytes_le();
    let n = b.len().min(16);
    out[..n].copy_from_slice(&b[..n]);
    out
}

/// `poly1305_blocks`: for each whole 16-byte block of `input`, h = (h + block + padbit·2^128)·r
/// mod p; `None` when `input` has no whole block (h stays as it was, bit for bit). Only bit 0
/// of `padbit` is part of the contract (OpenSSL passes 0 or 1).
pub fn poly1305_blocks(h: &BigUint, r: u128, input: &[u8], padbit: u32) -> Option<BigUint> {
    let blocks = input.chunks_exact(16);
    if blocks.len() == 0 {
        return None;
    }
    let (p, r) = (poly1305::p(), BigUint::from(r));
    let pad = BigUint::from(padbit & 1) << 128u32;
    Some(blocks.fold(h.clone(), |h, b| ((h + BigUint::from_bytes_le(b) + &pad) * &r) % &p))
}

/// The last block OpenSSL's `Poly1305_Final` passes with padbit 0: the tail, 0x01, zeros.
pub fn padded_tail(tail: &[u8]) -> [u8; 16] {
    let mut b = [0u8; 16];
    let n = tail.len().min(15);
    b[..n].copy_from_slice(&tail[..n]);
    b[n] = 1;
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8439 §2.5.2 through init, blocks (padbit 1, then the padded tail with padbit 0) and
    /// every architecture's emit.
    #[test]
    fn rfc8439_2_5_2_through_the_openssl_shape() {
        let key: [u8; 32] = hex::decode("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b")
            .unwrap()
            .try_into()
            .unwrap();
        let msg = b"Cryptographic Forum Research Group";
        let r = u128::from_le_bytes(key[..16].try_into().unwrap()) & CLAMP;
        let whole = msg.len() / 16 * 16;
        let h = poly1305_blocks(&BigUint::default(), r, &msg[..whole], 1).unwrap();
        let h = poly1305_blocks(&h, r, &padded_tail(&msg[whole..]), 0).unwrap();
        for ctx in &POLY_CTXS {
            let c = ctx.init(key[..16].try_into().unwrap());
            assert_eq!(PolyCtx::h(&c), [0; 3]);
            let tag = ctx.emit(words(&h), key[16..].try_into().unwrap());
            assert_eq!(hex::encode(tag), "a8061dc1305136c6c22b8baf0c0127a9", "{:?}", ctx.arch);
        }
    }

    #[test]
    fn emit_exactness_per_reduction() {
        let x86 = PolyCtx::of(Arch::X86_64);
        let rv = PolyCtx::of(Arch::Riscv64);
        let p = words(&poly1305::p());
        assert!(x86.emit_exact(p) && x86.emit_exact([0, 0, 4]));
        // 2p and above: compare-only emit is wrong, the riscv64 fold is right.
        let two_p = words(&(poly1305::p() * 2u32));
        assert!(!x86.emit_exact(two_p));
        assert!(rv.emit_exact([7, 9, 1 << 40]));
        assert!(!x86.emit_exact([7, 9, 1 << 40]));
    }

    #[test]
    fn contexts_place_r_and_s1() {
        let r = 0x0ffffffc_0ffffffc_0ffffffc_0fffffffu128;
        let c = PolyCtx::of(Arch::Riscv64).with([1, 2, 3], r);
        assert_eq!(c.len(), 56);
        assert_eq!(PolyCtx::h(&c), [1, 2, 3]);
        let r1 = (r >> 64) as u64;
        assert_eq!(u64::from_le_bytes(c[40..48].try_into().unwrap()), r1 + (r1 >> 2));
        let a = PolyCtx::of(Arch::Aarch64).with([0; 3], r);
        assert_eq!(u64::from_le_bytes(a[32..40].try_into().unwrap()), r as u64);
        assert_eq!(&a[24..32], &[0; 8]);
    }

    #[test]
    fn md5_ctx_keeps_state_first() {
        let c = md5_ctx(&[7; 16]);
        assert_eq!(c.len(), MD5_CTX_BYTES);
        assert_eq!(&c[..16], &[7; 16]);
        let mut s = crate::reference::md5::IV;
        assert_eq!(md5_block_data_order(&mut s, &[0; 64], 2), None);
        assert_eq!(md5_block_data_order(&mut s, &[0; 128], 0), Some(()));
        assert_eq!(s, crate::reference::md5::IV);
    }
}
