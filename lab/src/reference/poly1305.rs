//! Poly1305 (RFC 8439 §2.5) in the JDK's `IntegerPolynomial1305` limb form: five 26-bit limbs in
//! 64-bit words, value = Σ limb\[i\]·2^(26·i), with the `poly1305_processBlocks` contract of the
//! HotSpot stub. Two implementations of `processBlocks`: [`process_blocks`], fixed-width (64-bit
//! limbs, `u128` products) for the lab's hot path, and [`process_blocks_bigint`], on big
//! integers so that the oracle is obviously right; tests hold them equal to each other and to
//! RustCrypto's `poly1305`.

use std::fmt;

use num_bigint::BigUint;

/// Bytes per block.
pub const BLOCK: usize = 16;

/// Bits per limb.
pub const LIMB_BITS: u32 = 26;

/// The contract's bound on limbs 0..3 (exclusive): 2^26.
pub const LIMB_BOUND: u64 = 1 << 26;
/// The contract's bound on limb 4 (exclusive): 2^27.
pub const TOP_LIMB_BOUND: u64 = 1 << 27;

/// The clamp mask for r (RFC 8439 §2.5.1), little-endian as a 128-bit number.
pub const CLAMP: u128 = 0x0fff_fffc_0fff_fffc_0fff_fffc_0fff_ffff;

/// p = 2^130 - 5.
pub fn p() -> BigUint {
    (BigUint::from(1u8) << 130u32) - 5u32
}

/// Five 26-bit limbs in 64-bit words, as the kernel reads and writes `acc` and `r`.
/// The value is Σ limb\[i\]·2^(26·i); it need not be reduced mod p.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Limbs26(pub [u64; 5]);

impl Limbs26 {
    /// The number the limbs stand for (not reduced).
    pub fn value(&self) -> BigUint {
        self.0.iter().rev().fold(BigUint::default(), |v, &l| (v << LIMB_BITS) + l)
    }

    /// Splits `v` (< 2^130 for in-bounds limbs) into limbs 26 bits each; limb 4 takes the rest.
    pub fn from_value(v: &BigUint) -> Limbs26 {
        let mask = BigUint::from(LIMB_BOUND - 1);
        let mut out = [0u64; 5];
        for (i, l) in out.iter_mut().enumerate() {
            let part = if i == 4 { v >> (LIMB_BITS * 4) } else { (v >> (LIMB_BITS * i as u32)) & &mask };
            *l = part.iter_u64_digits().next().unwrap_or(0);
        }
        Limbs26(out)
    }

    /// The value reduced mod p.
    pub fn reduced(&self) -> BigUint {
        self.value() % p()
    }

    /// Whether limbs 0..3 are below 2^26 and limb 4 below 2^27 (the lab's contract bounds).
    pub fn within_bounds(&self) -> bool {
        self.0[..4].iter().all(|&l| l < LIMB_BOUND) && self.0[4] < TOP_LIMB_BOUND
    }

    /// The first limb out of bounds, as `(index, value)`.
    pub fn first_out_of_bounds(&self) -> Option<(usize, u64)> {
        self.0
            .iter()
            .enumerate()
            .find(|&(i, &l)| l >= if i == 4 { TOP_LIMB_BOUND } else { LIMB_BOUND })
            .map(|(i, &l)| (i, l))
    }

    /// The 40 little-endian bytes the kernel sees (`int64_t[5]`).
    pub fn to_bytes(&self) -> [u8; 40] {
        let mut b = [0u8; 40];
        for (i, l) in self.0.iter().enumerate() {
            b[8 * i..8 * i + 8].copy_from_slice(&l.to_le_bytes());
        }
        b
    }

    /// Limbs from 40 little-endian bytes.
    ///
    /// # Panics
    /// If `b` is shorter than 40 bytes.
    pub fn from_bytes(b: &[u8]) -> Limbs26 {
        Limbs26(std::array::from_fn(|i| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"))))
    }
}

impl fmt::Debug for Limbs26 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Limbs26 {
    /// Prints the number and the limbs: `0x1234 [0x..., 0x..., ...]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x} [", self.value())?;
        for (i, l) in self.0.iter().enumerate() {
            write!(f, "{}{l:#x}", if i == 0 { "" } else { ", " })?;
        }
        write!(f, "]")
    }
}

/// r from the first 16 key bytes, clamped (RFC 8439 §2.5.1), as limbs.
pub fn clamp_r(key_r: &[u8; 16]) -> Limbs26 {
    // Fixed width: this runs inside `lab bench`'s timed calls, where a big integer cost more
    // than the 64-byte MAC it prepares.
    let r = u128::from_le_bytes(*key_r) & CLAMP;
    Limbs26(std::array::from_fn(|i| ((r >> (26 * i)) & 0x3ff_ffff) as u64))
}

/// Whether `r` is a clamped value (what kernels may rely on).
pub fn is_clamped(r: &Limbs26) -> bool {
    r.within_bounds() && r.value() < (BigUint::from(1u8) << 128u32) && {
        let v = r.value().iter_u64_digits().collect::<Vec<_>>();
        let v = u128::from(v.first().copied().unwrap_or(0)) | (u128::from(v.get(1).copied().unwrap_or(0)) << 64);
        v & !CLAMP == 0
    }
}

/// `poly1305_processBlocks`: for each whole 16-byte block of `input`,
/// `acc = (acc + block + 2^128) * r mod p`; a tail under 16 bytes is ignored. With no whole block
/// `acc` is returned unchanged (the same limbs, not a reduced form); otherwise the result is
/// fully reduced mod p. Same output as [`process_blocks_bigint`] for every input: fixed-width
/// ([`Fixed130`]) when `acc` is within the contract's bounds and `r` is clamped (all the lab
/// plans), big integers otherwise.
pub fn process_blocks(acc: &Limbs26, r: &Limbs26, input: &[u8]) -> Limbs26 {
    let blocks = input.chunks_exact(BLOCK);
    if blocks.len() == 0 {
        return *acc;
    }
    let (Some(h), Some(r)) = (Fixed130::from_limbs(acc), ClampedR::from_limbs(r)) else {
        return process_blocks_bigint(acc, r, input);
    };
    h.blocks(&r, input, 1).reduced().to_limbs()
}

/// A number below 2^131 (and below 2^130 + 2^64 between blocks) as three 64-bit words
/// `h0 + h1·2^64 + h2·2^128`. The multiply by r and partial reduction mod p = 2^130 - 5 follow
/// the 64-bit (`u128` product) form of RFC 8439 §2.5 that poly1305-donna and OpenSSL's
/// `crypto/poly1305/poly1305.c` use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed130 {
    h: [u64; 3],
}

/// A clamped r as two 64-bit words, with `s1 = r1 + r1/4`: clamping clears the low two bits of
/// r1, so `h·r1·2^128 = h·(r1/4)·2^130 ≡ h·s1 (mod p)` (2^130 ≡ 5).
#[derive(Debug, Clone, Copy)]
pub struct ClampedR {
    r0: u64,
    r1: u64,
    s1: u64,
}

impl ClampedR {
    /// r from limbs, or `None` when the limbs are out of bounds or the value is not clamped.
    pub fn from_limbs(r: &Limbs26) -> Option<ClampedR> {
        let h = Fixed130::unreduced(r)?;
        (h.h[2] == 0).then(|| ClampedR::new(u128::from(h.h[0]) | u128::from(h.h[1]) << 64))?
    }

    /// r from its 128-bit value, or `None` when a bit outside [`CLAMP`] is set.
    pub fn new(r: u128) -> Option<ClampedR> {
        (r & !CLAMP == 0).then(|| {
            let (r0, r1) = (r as u64, (r >> 64) as u64);
            ClampedR { r0, r1, s1: r1 + (r1 >> 2) }
        })
    }

    /// The 128-bit value of r.
    pub fn value(&self) -> u128 {
        u128::from(self.r0) | u128::from(self.r1) << 64
    }
}

impl Fixed130 {
    /// The value of in-bounds limbs (< 2^131), partly reduced (h2 < 4 + 1); `None` when a limb
    /// is out of the contract's bounds.
    pub fn from_limbs(l: &Limbs26) -> Option<Fixed130> {
        let mut f = Fixed130::unreduced(l)?;
        f.fold();
        Some(f)
    }

    /// The exact value of in-bounds limbs, h2 < 8.
    fn unreduced(l: &Limbs26) -> Option<Fixed130> {
        if !l.within_bounds() {
            return None;
        }
        // In-bounds limbs occupy disjoint bits; l4 < 2^27 puts its top 3 bits above 2^128.
        let [l0, l1, l2, l3, l4] = l.0.map(u128::from);
        let lo = l0 | l1 << 26 | l2 << 52 | l3 << 78 | (l4 & 0xff_ffff) << 104;
        Some(Fixed130 { h: [lo as u64, (lo >> 64) as u64, l.0[4] >> 24] })
    }

    /// The value `h0 + h1·2^64 + h2·2^128` of any three words (an OpenSSL base 2^64 context's
    /// h, however unreduced), partly reduced: h2 ends <= 4, the value is unchanged mod p.
    pub fn from_words(h: [u64; 3]) -> Fixed130 {
        let mut f = Fixed130 { h };
        f.fold();
        f
    }

    /// The three words `h0, h1, h2` (h = h0 + h1·2^64 + h2·2^128).
    pub fn words(&self) -> [u64; 3] {
        self.h
    }

    /// For each whole 16-byte block of `input`: `h = (h + block + pad·2^128)·r`, partly
    /// reduced; a tail under 16 bytes is ignored. `pad` is 1 (HotSpot's whole blocks, OpenSSL's
    /// padbit 1) or 0 (OpenSSL's padded last block). The one implementation of the block
    /// arithmetic behind both contract families' references.
    pub fn blocks(mut self, r: &ClampedR, input: &[u8], pad: u32) -> Fixed130 {
        for b in input.chunks_exact(BLOCK) {
            self.add_block(b, u64::from(pad & 1));
            self.mul_r(r);
        }
        self
    }

    /// `h += block + pad·2^128` for a 16-byte block (pad 1 for whole blocks).
    fn add_block(&mut self, block: &[u8], pad: u64) {
        let t0 = u64::from_le_bytes(block[..8].try_into().expect("16-byte block"));
        let t1 = u64::from_le_bytes(block[8..16].try_into().expect("16-byte block"));
        let d0 = u128::from(self.h[0]) + u128::from(t0);
        let d1 = u128::from(self.h[1]) + u128::from(t1) + (d0 >> 64);
        self.h = [d0 as u64, d1 as u64, self.h[2] + (d1 >> 64) as u64 + pad];
    }

    /// `h = h·r`, partly reduced mod p. Needs h2 <= 6 (true after [`add_block`](Self::add_block)
    /// on a partly reduced h): every product then fits in `u128`, h2·r0 + carry stays below
    /// 2^63, and the result is below 2^130 + 2^64.
    fn mul_r(&mut self, r: &ClampedR) {
        let [h0, h1, h2] = self.h.map(u128::from);
        let (r0, r1, s1) = (u128::from(r.r0), u128::from(r.r1), u128::from(r.s1));
        let d0 = h0 * r0 + h1 * s1;
        let d1 = h0 * r1 + h1 * r0 + h2 * s1 + (d0 >> 64);
        self.h = [d0 as u64, d1 as u64, (h2 * r0) as u64 + (d1 >> 64) as u64];
        self.fold();
    }

    /// Folds the bits from 2^130 up back in as `5·(h2 >> 2)` (2^130 ≡ 5 mod p): h2 ends <= 4,
    /// for any h2 (the product is formed in `u128`).
    fn fold(&mut self) {
        let c = u128::from(self.h[2] >> 2) * 5;
        let d0 = u128::from(self.h[0]) + c;
        let d1 = u128::from(self.h[1]) + (d0 >> 64);
        self.h = [d0 as u64, d1 as u64, (self.h[2] & 3) + (d1 >> 64) as u64];
    }

    /// The unique representative in [0, p): after `fold` h < 2^130 + 2^66 < 2p,
    /// so one conditional subtraction of p (add 5, drop 2^130) is enough.
    pub fn reduced(mut self) -> Fixed130 {
        self.fold();
        let d0 = u128::from(self.h[0]) + 5;
        let d1 = u128::from(self.h[1]) + (d0 >> 64);
        let g2 = self.h[2] + (d1 >> 64) as u64;
        if g2 >= 4 {
            self.h = [d0 as u64, d1 as u64, g2 - 4];
        }
        self
    }

    /// Limbs of 26 bits; limb 4 takes the bits from 2^104 up.
    pub fn to_limbs(self) -> Limbs26 {
        let lo = u128::from(self.h[0]) | u128::from(self.h[1]) << 64;
        let m = LIMB_BOUND as u128 - 1;
        Limbs26([
            (lo & m) as u64,
            (lo >> 26 & m) as u64,
            (lo >> 52 & m) as u64,
            (lo >> 78 & m) as u64,
            (lo >> 104) as u64 | self.h[2] << 24,
        ])
    }
}

/// [`process_blocks`] on big integers: the test oracle.
pub fn process_blocks_bigint(acc: &Limbs26, r: &Limbs26, input: &[u8]) -> Limbs26 {
    let blocks = input.chunks_exact(BLOCK);
    if blocks.len() == 0 {
        return *acc;
    }
    let (p, r, hibit) = (p(), r.value(), BigUint::from(1u8) << 128u32);
    let h = blocks.fold(acc.value(), |h, b| ((h + BigUint::from_bytes_le(b) + &hibit) * &r) % &p);
    Limbs26::from_value(&h)
}

/// The full one-shot tag (RFC 8439 §2.5.1): clamp r, whole blocks through [`process_blocks`],
/// then the tail block with its 0x01 byte and no 2^128 bit, then `+ s` mod 2^128.
pub fn tag(key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
    let r = clamp_r(key[..16].try_into().expect("16 bytes"));
    let whole = msg.len() / BLOCK * BLOCK;
    let acc = process_blocks(&Limbs26::default(), &r, &msg[..whole]);
    finish(&acc, &r, &msg[whole..], key[16..].try_into().expect("16 bytes"))
}

/// The host's part of a tag after the kernel processed the whole blocks: the tail block
/// (`tail.len() < 16`; none when empty) and `+ s` mod 2^128 (RFC 8439 §2.5.1).
/// Fixed-width when `acc` is within bounds, `r` clamped and the tail shorter than a block
/// (always, for what the lab plans); [`finish_bigint`] otherwise, with the same output.
pub fn finish(acc: &Limbs26, r: &Limbs26, tail: &[u8], s: &[u8; 16]) -> [u8; 16] {
    let (Some(mut h), Some(cr)) = (Fixed130::from_limbs(acc), ClampedR::from_limbs(r)) else {
        return finish_bigint(acc, r, tail, s);
    };
    if tail.len() >= BLOCK {
        return finish_bigint(acc, r, tail, s);
    }
    if !tail.is_empty() {
        let mut block = [0u8; BLOCK];
        block[..tail.len()].copy_from_slice(tail);
        block[tail.len()] = 1;
        h.add_block(&block, 0);
        h.mul_r(&cr);
    }
    let h = h.reduced();
    let lo = u128::from(h.h[0]) | u128::from(h.h[1]) << 64;
    lo.wrapping_add(u128::from_le_bytes(*s)).to_le_bytes()
}

/// [`finish`] on big integers: the test oracle.
pub fn finish_bigint(acc: &Limbs26, r: &Limbs26, tail: &[u8], s: &[u8; 16]) -> [u8; 16] {
    let p = p();
    let mut h = acc.value() % &p;
    if !tail.is_empty() {
        let mut block = tail.to_vec();
        block.push(1);
        h = ((h + BigUint::from_bytes_le(&block)) * r.value()) % &p;
    }
    let t = (h + BigUint::from_bytes_le(s)) % (BigUint::from(1u8) << 128u32);
    let mut out = [0u8; 16];
    let bytes = t.to_bytes_le();
    out[..bytes.len()].copy_from_slice(&bytes);
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn clamp_r_equals_the_big_integer_split() {
        for seed in 0u8..=255 {
            let key: [u8; 16] =
                std::array::from_fn(|i| seed.wrapping_mul(37).wrapping_add((i as u8).wrapping_mul(101)) ^ 0xa5);
            let want = Limbs26::from_value(&BigUint::from(u128::from_le_bytes(key) & CLAMP));
            assert_eq!(clamp_r(&key), want, "{key:?}");
        }
        assert_eq!(clamp_r(&[0xff; 16]), Limbs26::from_value(&BigUint::from(CLAMP)));
    }

    use super::*;
    use poly1305::universal_hash::KeyInit;
    use proptest::prelude::*;

    #[test]
    fn rfc8439_2_5_2() {
        let key: [u8; 32] = hex::decode("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b")
            .unwrap()
            .try_into()
            .unwrap();
        let tag = tag(&key, b"Cryptographic Forum Research Group");
        assert_eq!(hex::encode(tag), "a8061dc1305136c6c22b8baf0c0127a9");
    }

    #[test]
    fn matches_rustcrypto_poly1305_for_lengths_0_to_100() {
        let key: [u8; 32] = std::array::from_fn(|i| (i * 37 + 11) as u8);
        let msg: Vec<u8> = (0..100u32).map(|i| (i * 13 + 1) as u8).collect();
        for n in 0..=msg.len() {
            let theirs = poly1305::Poly1305::new(&key.into()).compute_unpadded(&msg[..n]);
            assert_eq!(tag(&key, &msg[..n]), <[u8; 16]>::from(theirs), "length {n}");
        }
    }

    /// In-bounds accumulators: random limbs, the largest limbs, and values around p and 2^130.
    fn acc_strategy() -> impl Strategy<Value = Limbs26> {
        let top = Limbs26([LIMB_BOUND - 1, LIMB_BOUND - 1, LIMB_BOUND - 1, LIMB_BOUND - 1, TOP_LIMB_BOUND - 1]);
        let near_p = (0u64..16).prop_map(|d| {
            let v = p() + d - 8u32;
            Limbs26::from_value(&v)
        });
        prop_oneof![
            (0..LIMB_BOUND, 0..LIMB_BOUND, 0..LIMB_BOUND, 0..LIMB_BOUND, 0..TOP_LIMB_BOUND)
                .prop_map(|(a, b, c, d, e)| Limbs26([a, b, c, d, e])),
            Just(top),
            Just(Limbs26::default()),
            near_p,
        ]
    }

    /// Clamped r: random, all clamp bits set, zero.
    fn r_strategy() -> impl Strategy<Value = Limbs26> {
        prop_oneof![any::<u128>(), Just(u128::MAX), Just(0)].prop_map(|v| clamp_r(&v.to_le_bytes()))
    }

    proptest! {
        #[test]
        fn fixed_width_process_blocks_equals_the_bigint_oracle(
            acc in acc_strategy(),
            r in r_strategy(),
            input in prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..200),
                (0usize..12).prop_map(|n| vec![0xff; n * 16]),
            ],
        ) {
            prop_assert_eq!(process_blocks(&acc, &r, &input), process_blocks_bigint(&acc, &r, &input));
        }

        #[test]
        fn fixed_width_finish_equals_the_bigint_oracle(
            acc in acc_strategy(),
            r in r_strategy(),
            tail in proptest::collection::vec(any::<u8>(), 0..16),
            s in any::<[u8; 16]>(),
        ) {
            prop_assert_eq!(finish(&acc, &r, &tail, &s), finish_bigint(&acc, &r, &tail, &s));
        }

        #[test]
        fn tags_equal_rustcrypto(key in any::<[u8; 32]>(), msg in proptest::collection::vec(any::<u8>(), 0..300)) {
            let theirs = poly1305::Poly1305::new(&key.into()).compute_unpadded(&msg);
            prop_assert_eq!(tag(&key, &msg), <[u8; 16]>::from(theirs));
        }
    }

    #[test]
    fn full_reduction_at_p_and_around_it() {
        for d in 0u32..12 {
            let acc = Limbs26::from_value(&(p() + d - 6u32));
            let (r, s) = (clamp_r(&[0x5a; 16]), [0u8; 16]);
            assert_eq!(finish(&acc, &r, &[], &s), finish_bigint(&acc, &r, &[], &s), "p + {d} - 6");
            assert_eq!(process_blocks(&acc, &r, &[0; 16]), process_blocks_bigint(&acc, &r, &[0; 16]), "p + {d} - 6");
        }
    }

    #[test]
    fn outside_the_contract_falls_back_to_big_integers() {
        // Out-of-bounds acc and unclamped r are not what the lab plans, yet stay exact.
        let acc = Limbs26([u64::MAX, 1, 2, 3, u64::MAX]);
        let r = Limbs26([LIMB_BOUND - 1; 5]);
        let input = [0xa5u8; 48];
        assert!(Fixed130::from_limbs(&acc).is_none() && ClampedR::from_limbs(&r).is_none());
        assert_eq!(process_blocks(&acc, &r, &input), process_blocks_bigint(&acc, &r, &input));
        assert_eq!(finish(&acc, &r, &input[..5], &[7; 16]), finish_bigint(&acc, &r, &input[..5], &[7; 16]));
    }

    #[test]
    fn limbs_roundtrip_and_bounds() {
        let max = Limbs26([LIMB_BOUND - 1, LIMB_BOUND - 1, LIMB_BOUND - 1, LIMB_BOUND - 1, TOP_LIMB_BOUND - 1]);
        assert!(max.within_bounds());
        assert_eq!(max.value(), (BigUint::from(1u8) << 131u32) - 1u32);
        assert_eq!(Limbs26::from_value(&max.value()), max);
        assert_eq!(Limbs26([0, 0, 0, 0, TOP_LIMB_BOUND]).first_out_of_bounds(), Some((4, TOP_LIMB_BOUND)));
    }

    #[test]
    fn short_input_leaves_acc_untouched_even_unreduced() {
        let acc = Limbs26([LIMB_BOUND - 1, 0, 0, 0, TOP_LIMB_BOUND - 1]);
        let r = clamp_r(&[0xff; 16]);
        assert_eq!(process_blocks(&acc, &r, &[0u8; 15]), acc);
        assert!(is_clamped(&r));
    }
}
