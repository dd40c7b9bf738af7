//! Poly1305 (RFC 8439 §2.5) in the JDK's `IntegerPolynomial1305` limb form: five 26-bit limbs in
//! 64-bit words, value = Σ limb[i]·2^(26·i), with the `poly1305_processBlocks` contract of the
//! HotSpot stub. The arithmetic is done on big integers so that the oracle is obviously right;
//! speed is the kernels' business.

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
/// The value is Σ limb[i]·2^(26·i); it need not be reduced mod p.
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
    Limbs26::from_value(&BigUint::from(u128::from_le_bytes(*key_r) & CLAMP))
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
/// `acc` is returned unchanged (the same limbs, not a reduced form).
pub fn process_blocks(acc: &Limbs26, r: &Limbs26, input: &[u8]) -> Limbs26 {
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
pub fn finish(acc: &Limbs26, r: &Limbs26, tail: &[u8], s: &[u8; 16]) -> [u8; 16] {
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
    use super::*;
    use poly1305::universal_hash::KeyInit;

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
