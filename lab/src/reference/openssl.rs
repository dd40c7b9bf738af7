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
use crate::reference::poly1305::{self, ClampedR, Fixed130, CLAMP};
use crate::vocab::arch::Arch;

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

pub use crate::vocab::poly_ctx::{EmitReduction, PolyCtx, H64};

impl PolyCtx {
    /// The context layout of `arch` (its row's `openssl_poly1305`).
    pub fn of(arch: Arch) -> &'static PolyCtx {
        &arch.spec().openssl_poly1305
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
    /// Fixed-width; [`PolyCtx::emit_bigint`] is its oracle.
    pub fn emit(&self, h: H64, nonce: &[u8; 16]) -> [u8; 16] {
        let h = match self.emit {
            EmitReduction::Compare => h,
            EmitReduction::FoldThenCompare => Fixed130::from_words(h).words(),
        };
        // g = h + 5 (carries into a 4th word are kept in g2 as u128); g >= 2^130: take g.
        let g0 = u128::from(h[0]) + 5;
        let g1 = u128::from(h[1]) + (g0 >> 64);
        let g2 = u128::from(h[2]) + (g1 >> 64);
        let low = if g2 >> 2 != 0 { (g0 as u64, g1 as u64) } else { (h[0], h[1]) };
        let v = u128::from(low.0) | u128::from(low.1) << 64;
        v.wrapping_add(u128::from_le_bytes(*nonce)).to_le_bytes()
    }

    /// [`PolyCtx::emit`] on big integers: the test oracle.
    pub fn emit_bigint(&self, h: H64, nonce: &[u8; 16]) -> [u8; 16] {
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
        let exact = reduced(h);
        self.emit(h, &[0; 16]) == (u128::from(exact[0]) | u128::from(exact[1]) << 64).to_le_bytes()
    }
}

/// h reduced mod 2^130-5: the words of the unique representative in [0, p).
pub fn reduced(h: H64) -> H64 {
    Fixed130::from_words(h).reduced().words()
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
/// of `padbit` is part of the contract (OpenSSL passes 0 or 1). The result is fully reduced.
/// Fixed-width ([`Fixed130::blocks`], the arithmetic of the HotSpot reference) for a clamped
/// `r`; [`poly1305_blocks_bigint`] otherwise and in tests, with the same output.
pub fn poly1305_blocks(h: H64, r: u128, input: &[u8], padbit: u32) -> Option<H64> {
    if input.len() < 16 {
        return None;
    }
    let Some(cr) = ClampedR::new(r) else {
        return poly1305_blocks_bigint(&value(h), r, input, padbit).map(|v| words(&v));
    };
    Some(Fixed130::from_words(h).blocks(&cr, input, padbit).reduced().words())
}

/// [`poly1305_blocks`] on big integers: the test oracle.
pub fn poly1305_blocks_bigint(h: &BigUint, r: u128, input: &[u8], padbit: u32) -> Option<BigUint> {
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
    use proptest::prelude::*;

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
        let h = poly1305_blocks([0; 3], r, &msg[..whole], 1).unwrap();
        let h = poly1305_blocks(h, r, &padded_tail(&msg[whole..]), 0).unwrap();
        let big = poly1305_blocks_bigint(&BigUint::default(), r, &msg[..whole], 1).unwrap();
        assert_eq!(words(&poly1305_blocks_bigint(&big, r, &padded_tail(&msg[whole..]), 0).unwrap()), h);
        for arch in Arch::ALL {
            let ctx = PolyCtx::of(arch);
            let c = ctx.init(key[..16].try_into().unwrap());
            assert_eq!(PolyCtx::h(&c), [0; 3]);
            let tag = ctx.emit(h, key[16..].try_into().unwrap());
            assert_eq!(hex::encode(tag), "a8061dc1305136c6c22b8baf0c0127a9", "{arch}");
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

    /// Any three words of h: random, all ones, around p, 2p and 2^130, and h2 at its extremes.
    fn h_strategy() -> impl Strategy<Value = H64> {
        let p = words(&poly1305::p());
        let near = |base: H64| {
            (0u64..16).prop_map(move |d| {
                let v = value(base) + d;
                words(&(v - 8u32))
            })
        };
        prop_oneof![
            any::<[u64; 3]>(),
            (any::<u64>(), any::<u64>(), 0u64..8).prop_map(|(a, b, c)| [a, b, c]),
            Just([u64::MAX; 3]),
            Just([0; 3]),
            near(p),
            near(words(&(poly1305::p() * 2u32))),
            near([0, 0, 4]),
        ]
    }

    fn r_strategy() -> impl Strategy<Value = u128> {
        prop_oneof![any::<u128>(), Just(u128::MAX), Just(0)].prop_map(|r| r & CLAMP)
    }

    proptest! {
        #[test]
        fn fixed_width_poly1305_blocks_equals_the_bigint_oracle(
            h in h_strategy(),
            r in r_strategy(),
            input in prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..120),
                (0usize..8).prop_map(|n| vec![0xff; n * 16]),
            ],
            padbit in prop_oneof![Just(0u32), Just(1), any::<u32>()],
        ) {
            let big = poly1305_blocks_bigint(&value(h), r, &input, padbit).map(|v| words(&v));
            prop_assert_eq!(poly1305_blocks(h, r, &input, padbit), big);
        }

        #[test]
        fn fixed_width_emit_and_reduction_equal_the_bigint_oracle(h in h_strategy(), nonce in any::<[u8; 16]>()) {
            for arch in Arch::ALL {
                let ctx = PolyCtx::of(arch);
                prop_assert_eq!(ctx.emit(h, &nonce), ctx.emit_bigint(h, &nonce), "{}", arch);
            }
            prop_assert_eq!(value(reduced(h)), value(h) % poly1305::p());
        }
    }

    proptest! {
        /// A whole tag the way OpenSSL drives the block function (padbit 1, then the padded tail
        /// with padbit 0, then each architecture's emit) equals RustCrypto's.
        #[test]
        fn tags_through_the_openssl_shape_equal_rustcrypto(
            key in any::<[u8; 32]>(),
            msg in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            use ::poly1305::universal_hash::KeyInit;
            let theirs: [u8; 16] = ::poly1305::Poly1305::new(&key.into()).compute_unpadded(&msg).into();
            let r = u128::from_le_bytes(key[..16].try_into().unwrap()) & CLAMP;
            let whole = msg.len() / 16 * 16;
            let h = poly1305_blocks([0; 3], r, &msg[..whole], 1).unwrap_or([0; 3]);
            let h = if whole == msg.len() { h } else { poly1305_blocks(h, r, &padded_tail(&msg[whole..]), 0).unwrap() };
            for arch in Arch::ALL {
                prop_assert_eq!(PolyCtx::of(arch).emit(h, key[16..].try_into().unwrap()), theirs, "{}", arch);
            }
        }
    }

    #[test]
    fn an_unclamped_r_falls_back_to_big_integers() {
        let (h, r, input) = ([5, 6, 7], u128::MAX, [0xa5u8; 32]);
        let big = poly1305_blocks_bigint(&value(h), r, &input, 1).map(|v| words(&v));
        assert_eq!(poly1305_blocks(h, r, &input, 1), big);
        assert_ne!(big, poly1305_blocks(h, r & CLAMP, &input, 1));
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
