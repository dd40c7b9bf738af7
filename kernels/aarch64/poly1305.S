// Poly1305 block function (RFC 8439 §2.5) for aarch64, ARMv8.0-A base ISA: scalar, with a NEON path.
//
//   void poly1305_processBlocks(const uint8_t *input, int64_t length,
//                               int64_t acc[5], const int64_t r[5])
//
// For each whole 16-byte block: acc = (acc + block + 2^128) * r mod p, p = 2^130 - 5.
// A tail under 16 bytes is ignored; length < 16 returns before acc is read or written.
// acc and r are the JDK IntegerPolynomial1305 layout: five 26-bit limbs in 64-bit words,
// value = sum(limb[i] * 2^(26*i)). In: limbs 0-3 < 2^26, limb 4 < 2^27 (so acc may be >= p);
// r clamped (RFC 8439 §2.5.1). Out: the same bounds, congruent mod p.
//
// Method (as OpenSSL's poly1305-armv8): convert acc to radix 2^64, h = h0 + h1*2^64 + h2*2^128,
// r to r0 + r1*2^64 (r < 2^124 after clamping). Per block:
//   h += m + 2^128
//   d = h * r, folded mod p on the fly: a product term at 2^128 * 2^k becomes
//       5/4 * 2^k times it, because 2^130 = 5 (mod p). The clamp clears the low two bits of
//       r1 (r & 0x0ffffffc0ffffffc0ffffffc0fffffff), so s1 = r1 + (r1 >> 2) = 5 * (r1 / 4)
//       is exact and h1*r1*2^128 = h1*s1 (mod p), h2*r1*2^192 = h2*s1*2^64 (mod p).
//     d0 = lo(h0*r0) + lo(h1*s1)
//     d1 = hi(h0*r0) + hi(h1*s1) + lo(h0*r1) + lo(h1*r0) + h2*s1     (+ carries)
//     d2 = hi(h0*r1) + hi(h1*r0) + h2*r0                             (+ carries)
//   partial reduction: d2 = 4q + (d2 & 3), 2^130 * q = 5q = (d2 & ~3) + (d2 >> 2):
//     h = d0 + d1*2^64 + (d2 & 3)*2^128 + 5q.
// Bounds: on entry h2 = limb4 >> 24 <= 7, later h2 <= 4; after adding the block h2 <= 9.
// Then h2*s1 < 9 * 1.25 * 2^60 and d2 < 11 * 2^60 fit in 64 bits, and 5q < 2^64, so no
// carry is lost. The result has h2 <= 4, i.e. h < 5 * 2^128, whose limb 4 (h >> 104) is
// < 5 * 2^24 < 2^27: the outgoing limbs meet the bounds without a final reduction.
//
// Vector path: lengths of POLY_NEON_MIN (320) bytes and more take the NEON loop of
// poly1305-neon.inc (#included at the end; its header has the math, bounds, cost and the
// measured crossover); shorter ones, and the 1..3 blocks after its last group of four, this
// scalar loop. Advanced SIMD is baseline ARMv8-A, so the default aarch64 row has both.
//
// Cost per 16-byte block (loop body): 30 instructions = 1 ldp + 3 (add m + 2^128)
// + 18 (6 mul, 4 umulh, 8 add/adc) + 6 (partial reduction) + 2 (loop).
//
// Registers (AAPCS64 §6.1.1): only x0-x16 (caller-saved; x16 = IP0), no stack frame, no callee-saved
// register (the NEON path saves d8-d15 in its own frame). Unaligned input is loaded with plain ldp: aarch64 Linux permits unaligned
// ldr/ldp on normal memory. Every block load lies inside the 16 * floor(length/16) bytes.

// h = (h0 x4, h1 x5, h2 x6) * r (r0 x7, r1 x8, s1 x9) mod p, partially reduced: the block
// loop's multiply and reduction (header). Clobbers x10-x14. The NEON path computes r^2..r^4
// with it.
.macro POLY_MULR
    mul     x12, x4, x7                     // h0*r0
    umulh   x13, x4, x7
    mul     x10, x5, x9                     // h1*s1
    umulh   x11, x5, x9
    adds    x12, x12, x10                   // d0
    mul     x10, x4, x8                     // h0*r1
    adc     x13, x13, x11
    umulh   x14, x4, x8
    adds    x13, x13, x10
    mul     x10, x5, x7                     // h1*r0
    adc     x14, x14, xzr
    umulh   x11, x5, x7
    adds    x13, x13, x10
    mul     x10, x6, x9                     // h2*s1
    adc     x14, x14, x11
    mul     x11, x6, x7                     // h2*r0
    adds    x13, x13, x10                   // d1
    adc     x14, x14, x11                   // d2

    and     x10, x14, #-4                   // 4q
    and     x6, x14, #3                     // h2 = d2 & 3
    add     x10, x10, x14, lsr #2           // 5q
    adds    x4, x12, x10
    adcs    x5, x13, xzr
    adc     x6, x6, xzr

.endm

// Shortest length (bytes) that takes the NEON path (poly1305-neon.inc: its header has the
// measured crossover); shorter ones run the scalar loop below.
#define POLY_NEON_MIN 320

    .text
    .globl  poly1305_processBlocks
    .type   poly1305_processBlocks, %function
    .balign 16
poly1305_processBlocks:
    // One unsigned test for both ends: length - 16 >= POLY_NEON_MIN - 16 holds for a length
    // of at least POLY_NEON_MIN and for one under 16 (negative ones too, wrapped); the rest is
    // the scalar loop, counting x16 = length - 16 down by 16 (as many instructions as a
    // block count: the dispatch costs a short call nothing).
    sub     x16, x1, #16
    cmp     x16, #(POLY_NEON_MIN - 16)
    b.hs    .Lpoly_neon_or_none

    // r limbs -> r0 (x7), r1 (x8); s1 (x9) = r1 + (r1 >> 2).
    ldp     x10, x11, [x3]
    ldp     x12, x13, [x3, #16]
    ldr     x14, [x3, #32]
    orr     x7, x10, x11, lsl #26
    orr     x7, x7, x12, lsl #52
    lsr     x8, x12, #12
    orr     x8, x8, x13, lsl #14
    orr     x8, x8, x14, lsl #40
    add     x9, x8, x8, lsr #2

    // acc limbs -> h0 (x4), h1 (x5), h2 (x6). The limbs are within bounds, so the
    // shifted fields do not overlap and orr assembles them exactly.
    ldp     x10, x11, [x2]
    ldp     x12, x13, [x2, #16]
    ldr     x14, [x2, #32]
    orr     x4, x10, x11, lsl #26
    orr     x4, x4, x12, lsl #52
    lsr     x5, x12, #12
    orr     x5, x5, x13, lsl #14
    orr     x5, x5, x14, lsl #40
    lsr     x6, x14, #24

    mov     x15, #1                         // the 2^128 pad bit of every whole block

.Lpoly_block:
    ldp     x10, x11, [x0], #16             // m, little-endian
    adds    x4, x4, x10                     // h += m + 2^128
    adcs    x5, x5, x11
    adc     x6, x6, x15

    POLY_MULR

    subs    x16, x16, #16                   // bytes left past the next block
    b.pl    .Lpoly_block

    // h0, h1, h2 -> five 26-bit limbs (limb 4 takes h2 too: < 2^27, see above).
    and     x10, x4, #0x3ffffff
    ubfx    x11, x4, #26, #26
    extr    x12, x5, x4, #52                // bits 52..115
    and     x12, x12, #0x3ffffff
    ubfx    x13, x5, #14, #26
    extr    x14, x6, x5, #40                // bits 104..: h1 >> 40 | h2 << 24
    stp     x10, x11, [x2]
    stp     x12, x13, [x2, #16]
    str     x14, [x2, #32]
.Lpoly_ret:
    ret

.Lpoly_neon_or_none:
    cmp     x1, #16
    b.lt    .Lpoly_ret                      // length < 16 (signed): acc untouched
#include "poly1305-neon.inc"
    .size   poly1305_processBlocks, . - poly1305_processBlocks
