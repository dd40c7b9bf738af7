/*
 * Poly1305 block function, x86_64 baseline (no BMI2 mulx, no ADX, no AVX): the HotSpot
 * intrinsic contract
 *
 *   void poly1305_processBlocks(const uint8_t *input, int64_t length,
 *                               int64_t acc[5], const int64_t r[5]);
 *
 * For each whole 16-byte block m (RFC 8439 §2.5: little-endian, plus the 2^128 "0x01" bit):
 *     acc = (acc + m + 2^128) * r  mod p,   p = 2^130 - 5.
 * A tail under 16 bytes is ignored; length < 16 returns before touching acc at all.
 *
 * acc and r are five 26-bit limbs in 64-bit words (value = sum limb[i] * 2^(26 i)), as in the
 * JDK's IntegerPolynomial1305.  In: acc limbs 0..3 < 2^26, limb 4 < 2^27 (so acc < 2^131);
 * r clamped (RFC 8439 §2.5.1: r &= 0x0ffffffc0ffffffc0ffffffc0fffffff).
 *
 * Inside, acc is h = h0 + h1*2^64 + h2*2^128 (radix 2^64) and r = r0 + r1*2^64.  The clamp
 * gives r0, r1 < 2^60 and r1 = 0 mod 4 (bits 64, 65 of r are cleared), so with
 * s1 = r1 + (r1 >> 2) = 5 * (r1 / 4) and 2^130 = 5 (mod p):
 *     h1*r1 * 2^128 = h1 * (r1/4) * 2^130 = h1 * s1          (mod p)
 *     h2*r1 * 2^192 = h2 * s1 * 2^64                          (mod p)
 * hence h*r is congruent to the three columns
 *     c0 = h0*r0 + h1*s1,   c1 = h0*r1 + h1*r0 + h2*s1,   c2 = h2*r0       (x 2^0, 2^64, 2^128)
 * (h0*r0, h1*s1, h0*r1, h1*r0 are 128-bit `mul`s; h2 <= 9 is small, so h2*s1 and h2*r0 fit
 * in 64 bits with `imul`).  Registers: c0 = d1:h0' (r11 low), the 2^64 products h0*r1 + h1*r0
 * in d3:d2, and the sum lands as h0' + h1'*2^64 + d3*2^128, the layout of OpenSSL's
 * poly1305-x86_64 scalar block.  The partial reduction then folds everything above 2^130
 * back with 2^130 = 5: h2 = d3 & 3, h0 += 5 * (d3 >> 2), carried into h1, h2.  After it
 * h < 2^130 + 5*2^64, so h2 <= 4.
 *
 * Bounds (they make every step exact and one carry provably zero):
 *   entering a block h < 2^131 (input) or h2 <= 4 (after a block); adding m + 2^128 gives
 *   h2 <= 7 + 1 + 1 = 9.  r0 < 2^60, s1 < 1.25*2^60.  d1 = hi(h0*r0) + hi(h1*s1) + carry
 *   < 2.25*2^60 + 1 and h2*s1 <= 11.25*2^60, so d1 + h2*s1 < 2^64 never carries.
 *   d3 < hi(h0*r1) + hi(h1*r0) + 2 + h2*r0 < 11*2^60, so 5 * (d3 >> 2) < 2^64.
 *   (Checked against an exact model at h0 = h1 = 2^64-1, h2 = 9, r = the largest clamp.)
 *
 * Register use (SysV x86-64 psABI §3.2.1: rbx, rbp, r12-r14 are callee-saved, pushed and
 * popped here; the rest are scratch):
 *   rdi  input end         rsi  -16 * blocks (index, counts up to 0)     r14  acc
 *   r8   r0    r9  r1    r10  s1     r11 h0    rcx h1    rbx h2
 *   rbp  d1    r12 d2    r13 d3      rax, rdx  mul operands/results
 *
 * Cost per 16-byte block: 34 instructions (see the loop).
 *
 * Vector paths: an AVX2 path (poly1305-avx2.inc, built when clang defines __AVX2__) and an
 * AVX-512 IFMA path (poly1305-ifma.inc, when it defines __AVX512IFMA__) take long lengths;
 * each file's header has its math, bounds and measured crossover.  Both are #included
 * below (a lab build assembles only *.S files; the includes sit beside this one).
 */
        .intel_syntax noprefix

#define M26 0x3ffffff

#ifdef __AVX2__
/* Shortest length (bytes) that takes the AVX2 path: below it the vector set-up (three scalar
 * multiplies for r^2..r^4, one vector multiply for r^5..r^8, the limb tables) costs more than
 * the blocks it saves.  Measured on this lab's host (AMD EPYC, Zen 5, processBlocks alone, CPU
 * time, median of 15, 2026-12-02), ns/B scalar / AVX2: 192 B 0.30 / 0.36, 240 B 0.30 / 0.37,
 * 256 B 0.29 / 0.27, 272-304 B 0.29-0.30 / 0.30-0.31 (1..3 blocks left to the scalar loop),
 * 320 B 0.30 / 0.27, 384 B 0.29 / 0.22.  The crossover lies between 15 and 16 blocks: 16. */
#define POLY_AVX2_MIN 256
#endif

#ifdef __AVX512IFMA__
/* Shortest length (bytes) that takes the AVX-512 IFMA path (the 0..7 blocks after its groups of
 * eight take the scalar loop).  Measured as above (the two-chain IFMA loop), ns/B scalar /
 * AVX2 / IFMA: 240 B 0.28 / 0.36 / 0.40, 256 B 0.26 / 0.27 / 0.23, 320 B 0.26 / 0.23 / 0.23,
 * 336 B 0.25 / 0.24 / 0.23, 448 B 0.26 / 0.21 / 0.20, 592 B 0.26 / 0.19 / 0.14, 784 B 0.27 /
 * 0.18 / 0.10: from 256 B IFMA is at least as fast as AVX2 at every length (16-byte steps to
 * 784 B; equal at 320 B), whatever it leaves to the scalar loop.  So
 * the IFMA build dispatches to IFMA or scalar only (one compare, as the AVX2 build): its AVX2
 * path is assembled (the IFMA path uses its scalar macros) but never taken. */
#define POLY_IFMA_MIN 256
#endif

        .text
        .globl  poly1305_processBlocks
        .type   poly1305_processBlocks, @function
        .p2align 4
poly1305_processBlocks:
#ifdef __AVX512IFMA__
        cmp     rsi, POLY_IFMA_MIN
        jge     .Lpoly_ifma                     /* signed: a negative length stays scalar */
#elif defined(__AVX2__)
        cmp     rsi, POLY_AVX2_MIN
        jge     .Lpoly_avx2                     /* signed: a negative length stays scalar */
#endif
#ifdef __AVX2__
.Lpoly_scalar:
#endif
        cmp     rsi, 16
        jl      .Lpoly_none                     /* length < 16: acc untouched */
        push    rbx
        push    rbp
        push    r12
        push    r13
        push    r14
        mov     r14, rdx                        /* acc */

        /* r = r0 + r1*2^64 from 26-bit limbs (limbs of a clamped r are < 2^26, disjoint) */
        mov     r8, [rcx]
        mov     rax, [rcx + 8]
        shl     rax, 26
        or      r8, rax
        mov     rax, [rcx + 16]
        mov     r9, rax
        shl     rax, 52
        or      r8, rax                         /* r0 = l0 | l1<<26 | l2<<52 */
        shr     r9, 12
        mov     rax, [rcx + 24]
        shl     rax, 14
        or      r9, rax
        mov     rax, [rcx + 32]
        shl     rax, 40
        or      r9, rax                         /* r1 = l2>>12 | l3<<14 | l4<<40 */
        mov     r10, r9
        shr     r10, 2
        add     r10, r9                         /* s1 = r1 + r1/4 = 5*(r1/4) */

        /* h = h0 + h1*2^64 + h2*2^128 from acc (limbs within bounds: bit ranges disjoint) */
        mov     r11, [r14]
        mov     rax, [r14 + 8]
        shl     rax, 26
        or      r11, rax
        mov     rax, [r14 + 16]
        mov     rcx, rax
        shl     rax, 52
        or      r11, rax                        /* h0 = l0 | l1<<26 | l2<<52 */
        shr     rcx, 12
        mov     rax, [r14 + 24]
        shl     rax, 14
        or      rcx, rax
        mov     rax, [r14 + 32]
        mov     rbx, rax
        shl     rax, 40
        or      rcx, rax                        /* h1 = l2>>12 | l3<<14 | l4<<40 (mod 2^64) */
        shr     rbx, 24                         /* h2 = l4>>24 */

        /* Walk the blocks with a negative index from the end of the last whole block, so the
         * index update is also the loop test. */
        and     rsi, -16                        /* whole blocks only */
        add     rdi, rsi                        /* rdi = end of the last whole block */
        neg     rsi

        .p2align 4
.Lpoly_block:
        /* h += m + 2^128 (RFC 8439 §2.5: the block with its 0x01 byte appended) */
        add     r11, [rdi + rsi]
        adc     rcx, [rdi + rsi + 8]
        adc     rbx, 1

        /* h * r, by columns (header comment); h0' ends in r11, h1' in rcx, bits 128.. in r13 */
        mov     rax, r9
        mul     r11                             /* h0*r1 */
        mov     r12, rax
        mov     r13, rdx                        /* d3:d2 = h0*r1          (2^64 column) */

        mov     rax, r8
        mul     r11                             /* h0*r0 */
        mov     r11, rax
        mov     rbp, rdx                        /* d1:h0' = h0*r0         (2^0 column) */

        mov     rax, r8
        mul     rcx                             /* h1*r0 */
        add     r12, rax
        adc     r13, rdx                        /* d3:d2 += h1*r0 */

        mov     rax, r10
        mul     rcx                             /* h1*s1 = h1*r1*2^128 mod p */
        add     r11, rax
        adc     rbp, rdx                        /* d1:h0' += h1*s1 */

        /* h1' = d1 + h2*s1 + d2.  d1 + h2*s1 cannot carry: d1 < 2^60 + 1.25*2^60 + 1 and
         * h2*s1 <= 9 * 1.25*2^60, total < 13.6*2^60 < 2^64 (bounds in the header). */
        mov     rcx, rbx
        imul    rcx, r10                        /* h2*s1 = h2*r1*2^192 mod p, as 2^64 column */
        add     rcx, rbp
        imul    rbx, r8                         /* h2*r0 */
        add     rcx, r12
        adc     r13, rbx                        /* d3 += h2*r0 + carry: bits 128.. of h*r */

        /* partial reduction: 2^130 = 5 (mod p): h2 = d3 & 3, h0 += 5 * (d3 >> 2)
         * (d3 < 11*2^60, so 5 * (d3 >> 2) < 2^64 and fits one lea) */
        mov     rbx, r13
        shr     r13, 2
        and     rbx, 3
        lea     r13, [r13 + 4 * r13]
        add     r11, r13
        adc     rcx, 0
        adc     rbx, 0

        add     rsi, 16
        jnz     .Lpoly_block

        /* back to 26-bit limbs: limbs 0..3 < 2^26; h2 <= 4 so limb 4 < 5*2^24 < 2^27 */
        mov     rax, r11
        and     eax, M26
        mov     [r14], rax
        mov     rax, r11
        shr     rax, 26
        and     eax, M26
        mov     [r14 + 8], rax
        shr     r11, 52
        mov     rax, rcx
        shl     rax, 12
        or      rax, r11
        and     eax, M26
        mov     [r14 + 16], rax
        mov     rax, rcx
        shr     rax, 14
        and     eax, M26
        mov     [r14 + 24], rax
        shr     rcx, 40
        shl     rbx, 24
        or      rcx, rbx
        mov     [r14 + 32], rcx

        pop     r14
        pop     r13
        pop     r12
        pop     rbp
        pop     rbx
.Lpoly_none:
        ret

#ifdef __AVX2__
#include "poly1305-avx2.inc"
#ifdef __AVX512IFMA__
#include "poly1305-ifma.inc"
#endif
#endif
        .size   poly1305_processBlocks, . - poly1305_processBlocks
