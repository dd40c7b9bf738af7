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
 * AVX2 path (built only when clang defines __AVX2__, i.e. -march=x86-64-v3 and up; the
 * baseline x86_64 build assembles exactly the scalar code above and nothing else).
 * Lengths of at least POLY_AVX2_MIN bytes take it; shorter ones the scalar loop (crossover
 * measured with `lab bench`/native timing, see POLY_AVX2_MIN below).  The math is Goll &
 * Gueron, "Vectorization of Poly1305 message authentication code" (ITNG 2015), in radix 2^26
 * (RFC 8439 §2.5 arithmetic, five 26-bit limbs as in poly1305-donna):
 *
 *   With N = 4G blocks m_0 .. m_{N-1} (each with its 2^128 bit), RFC 8439's Horner loop gives
 *     acc' = sum_j (acc*[j = 0] + m_j) * r^(N - j)            (mod p).
 *   Lane l of four runs its own Horner chain over every fourth block with r^4:
 *     H_l <- (H_l + m_{4k+l}) * r^4      for the groups k = 0 .. G-2,  H = [acc, 0, 0, 0] first,
 *   and the last group multiplies lane l by r^(4-l) instead, so acc' = sum_l H_l.
 *   The four blocks of a group are loaded as two 256-bit words and split with vpunpck{l,h}qdq,
 *   which puts them in lane order (m0, m2, m1, m3): the last-group table holds
 *   (r^4, r^2, r^3, r^1) in that order.  Powers come from the scalar radix-2^64 multiply
 *   (macro POLY_MULR, the block loop's own arithmetic without the message), split to limbs.
 *
 *   One 4-lane product d = h * R (vpmuludq: 32x32 -> 64 bits per lane), with s_j = 5 r_j
 *   because 2^130 = 5 (mod p):
 *     d0 = h0 r0 + h1 s4 + h2 s3 + h3 s2 + h4 s1      d3 = h0 r3 + h1 r2 + h2 r1 + h3 r0 + h4 s4
 *     d1 = h0 r1 + h1 r0 + h2 s4 + h3 s3 + h4 s2      d4 = h0 r4 + h1 r3 + h2 r2 + h3 r1 + h4 r0
 *     d2 = h0 r2 + h1 r1 + h2 r0 + h3 s4 + h4 s3
 *   Lazy reduction (Goll & Gueron §3): one carry pass 0->1->2->3->4, 4->0 times 5, 0->1.
 *   Limbs 0, 2, 3, 4 end < 2^26, limb 1 slightly above; nothing is reduced mod p in the loop.
 *
 *   Bounds (every vpmuludq operand must be < 2^32, every sum < 2^64):
 *     powers: partially reduced (< 2^130 + 5*2^64), so limbs 0..3 < 2^26, limb 4 <= 2^26,
 *       s_j < 5*2^26 + 5 < 2^29.33.
 *     entering a multiply: h = H + m; H limbs < 2^26 + 2^10.2 after a lazy reduction, or acc's
 *       (< 2^26, limb 4 < 2^27) in the first group; m limbs < 2^26 (limb 4 < 2^25 with the
 *       2^128 bit), so every h limb < 2^28.
 *     each d_k: five terms < 2^28 * 2^29.33, so d_k < 2^59.7.  Carries along the chain stay
 *       < 2^33.7 + 1, so after the fold h0 < 2^26 + 5 * 2^33.8 < 2^36.2 and its carry into
 *       limb 1 is < 2^10.2: limb 1 < 2^26 + 2^10.2, the others < 2^26; all below 2^27,
 *       well inside vpmuludq's 32 bits.
 *     the last group: the four lanes' d_k are summed before any carry (< 4 * 2^59.7 < 2^62),
 *       then one full carry chain 0->1->2->3->4->0(x5)->1->2->3->4 in 64-bit registers
 *       leaves limbs 0..3 < 2^26 and limb 4 <= 2^26 (< 2^27, the contract's bound).
 *   A length with 1..3 whole blocks after the last group of four hands acc to the scalar loop.
 *
 *   Frame (rsp aligned to 32): Q at rsp+0, the r^4 table broadcast to all lanes, r0..r4 then
 *   s1..s4, 32 bytes each; F at rsp+288, the last-group table (r^4, r^2, r^3, r^1) in the
 *   same order; X at rsp+576, the powers in radix 2^64 (words 0, 1, 2 per lane) for the split.
 *   Registers in the vector loop: ymm0-4 h limbs, ymm5-9 d limbs, ymm10-13 scratch,
 *   ymm14 the 2^24 bit of limb 4 (the block's 2^128), ymm15 the 26-bit mask; rdi input,
 *   rbx groups left.  ymm registers are all scratch in the SysV psABI; vzeroupper on exit.
 *
 * AVX-512 IFMA path (built only when clang defines __AVX512IFMA__; lengths chosen by
 * POLY_IFMA_MIN / POLY_IFMA_SHORT below, the rest go to the AVX2 or scalar code).  The same
 * Horner split over eight lanes (Goll & Gueron 2015; the radix-2^44 form of their §4 with
 * 52-bit multiply-accumulate, Intel SDM vol. 2 VPMADD52LUQ/VPMADD52HUQ):
 *   h = h0 + h1 2^44 + h2 2^88 (limbs 44, 44, 42 bits), r the same, s_j = 20 r_j because
 *   2^132 = 4 * 2^130 = 20 (mod p).  Lane l of eight holds block 8k + (0 4 1 5 2 6 3 7)[l]
 *   (vpunpck{l,h}qdq of two 512-bit loads), so H <- (H + m) * r^8 in the loop and the last
 *   group multiplies by (r^8, r^4, r^7, r^3, r^6, r^2, r^5, r^1) before the lanes are summed.
 *     d0 = h0 r0 + h1 s2 + h2 s1,  d1 = h0 r1 + h1 r0 + h2 s2,  d2 = h0 r2 + h1 r1 + h2 r0,
 *   each product as its low 52 bits (vpmadd52luq) and its bits 52..103 (vpmadd52huq); a high
 *   half of column k weighs 2^(44(k+1) + 8), column 2's 2^140 = 5 * 2^10 (mod p):
 *     t0 = lo0 + 5120 hi2,  t1 = lo1 + hi0 * 2^8,  t2 = lo2 + hi1 * 2^8,
 *   then one lazy carry pass 0->1->2, 2->0 times 5.
 *   Bounds (vpmadd52 reads 52 bits of each operand: every operand must be < 2^52):
 *     powers: r^k partially reduced (h2 <= 4 in radix 2^64), so r0, r1 < 2^44, r2 < 2^42.4,
 *       s1 < 2^48.4, s2 < 2^46.8.
 *     entering a multiply: limbs < 2^44 + 2^14.3 (after a carry pass) plus the message's
 *       (< 2^44, limb 2 <= 2^41 with the 2^128 bit), or acc's (< 2^44, h2 < 2^43): < 2^45.
 *     products < 2^45 * 2^48.4 = 2^93.4: low halves < 2^52, high halves < 2^41.4; three per
 *       column: lo < 2^53.6, hi < 2^43, so t0 < 2^53.6 + 5120 * 2^43 < 2^55.9, t1, t2 < 2^54.
 *     carry pass: c0 < 2^11.9, c1 < 2^10.1, c2 = t2 >> 42 < 2^12.1, 5 c2 < 2^14.4: h0 <
 *       2^44 + 2^14.4, h1 < 2^44, h2 < 2^42.
 *     last group: the eight lanes' t_k summed (< 2^58.9), two carry passes in 64-bit registers
 *       leave t0, t1 < 2^44, t2 <= 2^42 (h < 2^130 + 2^88), then 26-bit limbs with limb 4 =
 *       t2 >> 16 <= 2^26.
 *   The 0..7 blocks after the last group of eight take the scalar loop.
 *   Registers: zmm0-2 h, zmm3-8 the column halves, zmm9-14 scratch, zmm16-20 r^8 (r0 r1 r2
 *   s1 s2) in every lane, zmm21-25 the last-group table, zmm26 M44, zmm27 M42, zmm28 2^40;
 *   the powers in radix 2^64 on the stack (rsp 64-aligned: word 0, 1, 2 of lanes 0..7).
 *   Per eight blocks: 59 instructions with the loop's dec/jnz, 7.4 per block.
 */
        .intel_syntax noprefix

#define M26 0x3ffffff

#ifdef __AVX2__
/* Shortest length (bytes) that takes the AVX2 path: below it the vector set-up (three
 * scalar multiplies for r^2..r^4 and the limb tables) costs more than the blocks it saves.
 * Measured on this lab's host (AMD EPYC, Zen 4, 2.6 GHz; processBlocks alone, CPU time,
 * best of 15): 128 B scalar 0.33 ns/B, vector 0.34-0.36; 192 B scalar 0.32, vector 0.29-0.30;
 * 256 B scalar 0.31, vector 0.26.  The crossover lies between 8 and 12 blocks: 12. */
#define POLY_AVX2_MIN 192
#endif

#ifdef __AVX512IFMA__
/* Lengths that take the AVX-512 IFMA path: every length from POLY_IFMA_MIN bytes, and from
 * POLY_IFMA_SHORT those that leave fewer than 4 blocks after the groups of eight.  The
 * blocks after the last group of eight take the scalar loop, so below ~600 bytes a length
 * with 4..7 of them is faster on the AVX2 path.  Measured on this lab's host (Zen 4,
 * processBlocks alone, CPU time, best of 15, ns/B AVX2 / IFMA): 192 B 0.30 / 0.43,
 * 256 B 0.25 / 0.19, 320 B 0.23 / 0.29, 384 B 0.22 / 0.19, 448 B 0.21 / 0.23,
 * 576 B 0.19 / 0.19, 624 B 0.21 / 0.19, 752 B 0.20 / 0.18, 1008 B 0.19 / 0.15. */
#define POLY_IFMA_MIN 640
#define POLY_IFMA_SHORT 256
#endif

        .text
        .globl  poly1305_processBlocks
        .type   poly1305_processBlocks, @function
        .p2align 4
poly1305_processBlocks:
#ifdef __AVX512IFMA__
        cmp     rsi, POLY_IFMA_MIN
        jge     .Lpoly_ifma                     /* signed: a negative length stays scalar */
        cmp     rsi, POLY_IFMA_SHORT
        jl      .Lpoly_no_ifma
        test    esi, 64                         /* (length / 16) mod 8 >= 4: leaves 4..7 blocks */
        jz      .Lpoly_ifma                     /* to the scalar loop, where AVX2 is faster */
.Lpoly_no_ifma:
#endif
#ifdef __AVX2__
        cmp     rsi, POLY_AVX2_MIN
        jge     .Lpoly_avx2                     /* signed: a negative length stays scalar */
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
/* h = (h0 r11, h1 rcx, h2 rbx) *= r (r0 r8, r1 r9, s1 r10) mod p, partially reduced: the block
 * loop's multiply and reduction (header), with r14 for d1.  Clobbers rax, rdx, r12-r14. */
.macro POLY_MULR
        mov     rax, r9
        mul     r11
        mov     r12, rax
        mov     r13, rdx                        /* d3:d2 = h0*r1 */
        mov     rax, r8
        mul     r11
        mov     r11, rax
        mov     r14, rdx                        /* d1:h0' = h0*r0 */
        mov     rax, r8
        mul     rcx
        add     r12, rax
        adc     r13, rdx                        /* d3:d2 += h1*r0 */
        mov     rax, r10
        mul     rcx
        add     r11, rax
        adc     r14, rdx                        /* d1:h0' += h1*s1 */
        mov     rcx, rbx
        imul    rcx, r10
        add     rcx, r14
        imul    rbx, r8
        add     rcx, r12
        adc     r13, rbx                        /* d3 = bits 128.. */
        mov     rbx, r13
        shr     r13, 2
        and     rbx, 3
        lea     r13, [r13 + 4 * r13]
        add     r11, r13
        adc     rcx, 0
        adc     rbx, 0                          /* 2^130 = 5: fold d3 >> 2 into h0 */
.endm

/* r = r0 + r1*2^64 (r8, r9) and s1 = 5*(r1/4) (r10) from the limbs at [rcx], as the scalar
 * entry does.  Clobbers rax. */
.macro POLY_LOAD_R
        mov     r8, [rcx]
        mov     rax, [rcx + 8]
        shl     rax, 26
        or      r8, rax
        mov     rax, [rcx + 16]
        mov     r9, rax
        shl     rax, 52
        or      r8, rax
        shr     r9, 12
        mov     rax, [rcx + 24]
        shl     rax, 14
        or      r9, rax
        mov     rax, [rcx + 32]
        shl     rax, 40
        or      r9, rax
        mov     r10, r9
        shr     r10, 2
        add     r10, r9
.endm

/* h (ymm0-4) += the four blocks at [rdi] as 26-bit limbs, lanes (m0, m2, m1, m3); rdi += 64. */
.macro POLY_ADD_BLOCKS
        vmovdqu     ymm10, ymmword ptr [rdi]            /* m0.lo m0.hi m1.lo m1.hi */
        vmovdqu     ymm11, ymmword ptr [rdi + 32]       /* m2.lo m2.hi m3.lo m3.hi */
        vpunpcklqdq ymm12, ymm10, ymm11                 /* lo words, lanes m0 m2 m1 m3 */
        vpunpckhqdq ymm13, ymm10, ymm11                 /* hi words */
        vpand       ymm10, ymm12, ymm15
        vpaddq      ymm0, ymm0, ymm10                   /* limb 0 = lo & M26 */
        vpsrlq      ymm11, ymm12, 26
        vpand       ymm11, ymm11, ymm15
        vpaddq      ymm1, ymm1, ymm11                   /* limb 1 = lo >> 26 & M26 */
        vpsrlq      ymm10, ymm12, 52
        vpsllq      ymm11, ymm13, 12
        vpor        ymm10, ymm10, ymm11
        vpand       ymm10, ymm10, ymm15
        vpaddq      ymm2, ymm2, ymm10                   /* limb 2 = (lo >> 52 | hi << 12) & M26 */
        vpsrlq      ymm11, ymm13, 14
        vpand       ymm11, ymm11, ymm15
        vpaddq      ymm3, ymm3, ymm11                   /* limb 3 = hi >> 14 & M26 */
        vpsrlq      ymm10, ymm13, 40
        vpor        ymm10, ymm10, ymm14
        vpaddq      ymm4, ymm4, ymm10                   /* limb 4 = hi >> 40 | 2^24 (2^128) */
        add         rdi, 64
.endm

/* d (ymm5-9) = h (ymm0-4) * the table at rsp+T: r_j at T + 32 j, s_j = 5 r_j at T + 128 + 32 j
 * (header: the five columns). */
.macro POLY_VMUL T
        vpmuludq    ymm5, ymm0, ymmword ptr [rsp + \T]          /* h0 r0 */
        vpmuludq    ymm6, ymm0, ymmword ptr [rsp + \T + 32]     /* h0 r1 */
        vpmuludq    ymm7, ymm0, ymmword ptr [rsp + \T + 64]     /* h0 r2 */
        vpmuludq    ymm8, ymm0, ymmword ptr [rsp + \T + 96]     /* h0 r3 */
        vpmuludq    ymm9, ymm0, ymmword ptr [rsp + \T + 128]    /* h0 r4 */
        vpmuludq    ymm10, ymm1, ymmword ptr [rsp + \T + 256]   /* h1 s4 */
        vpaddq      ymm5, ymm5, ymm10
        vpmuludq    ymm11, ymm1, ymmword ptr [rsp + \T]         /* h1 r0 */
        vpaddq      ymm6, ymm6, ymm11
        vpmuludq    ymm12, ymm1, ymmword ptr [rsp + \T + 32]    /* h1 r1 */
        vpaddq      ymm7, ymm7, ymm12
        vpmuludq    ymm13, ymm1, ymmword ptr [rsp + \T + 64]    /* h1 r2 */
        vpaddq      ymm8, ymm8, ymm13
        vpmuludq    ymm10, ymm1, ymmword ptr [rsp + \T + 96]    /* h1 r3 */
        vpaddq      ymm9, ymm9, ymm10
        vpmuludq    ymm11, ymm2, ymmword ptr [rsp + \T + 224]   /* h2 s3 */
        vpaddq      ymm5, ymm5, ymm11
        vpmuludq    ymm12, ymm2, ymmword ptr [rsp + \T + 256]   /* h2 s4 */
        vpaddq      ymm6, ymm6, ymm12
        vpmuludq    ymm13, ymm2, ymmword ptr [rsp + \T]         /* h2 r0 */
        vpaddq      ymm7, ymm7, ymm13
        vpmuludq    ymm10, ymm2, ymmword ptr [rsp + \T + 32]    /* h2 r1 */
        vpaddq      ymm8, ymm8, ymm10
        vpmuludq    ymm11, ymm2, ymmword ptr [rsp + \T + 64]    /* h2 r2 */
        vpaddq      ymm9, ymm9, ymm11
        vpmuludq    ymm12, ymm3, ymmword ptr [rsp + \T + 192]   /* h3 s2 */
        vpaddq      ymm5, ymm5, ymm12
        vpmuludq    ymm13, ymm3, ymmword ptr [rsp + \T + 224]   /* h3 s3 */
        vpaddq      ymm6, ymm6, ymm13
        vpmuludq    ymm10, ymm3, ymmword ptr [rsp + \T + 256]   /* h3 s4 */
        vpaddq      ymm7, ymm7, ymm10
        vpmuludq    ymm11, ymm3, ymmword ptr [rsp + \T]         /* h3 r0 */
        vpaddq      ymm8, ymm8, ymm11
        vpmuludq    ymm12, ymm3, ymmword ptr [rsp + \T + 32]    /* h3 r1 */
        vpaddq      ymm9, ymm9, ymm12
        vpmuludq    ymm13, ymm4, ymmword ptr [rsp + \T + 160]   /* h4 s1 */
        vpaddq      ymm5, ymm5, ymm13
        vpmuludq    ymm10, ymm4, ymmword ptr [rsp + \T + 192]   /* h4 s2 */
        vpaddq      ymm6, ymm6, ymm10
        vpmuludq    ymm11, ymm4, ymmword ptr [rsp + \T + 224]   /* h4 s3 */
        vpaddq      ymm7, ymm7, ymm11
        vpmuludq    ymm12, ymm4, ymmword ptr [rsp + \T + 256]   /* h4 s4 */
        vpaddq      ymm8, ymm8, ymm12
        vpmuludq    ymm13, ymm4, ymmword ptr [rsp + \T]         /* h4 r0 */
        vpaddq      ymm9, ymm9, ymm13
.endm

/* h (ymm0-4) = d (ymm5-9) lazily reduced: one pass 0->1->2->3->4->0 (x5) ->1 (bounds in the
 * header).  A serial chain, six carries: the loop is bound by vector-op throughput, not latency. */
.macro POLY_VCARRY
        vpsrlq      ymm10, ymm5, 26
        vpand       ymm0, ymm5, ymm15
        vpaddq      ymm6, ymm6, ymm10                   /* d1 += d0 >> 26 */
        vpsrlq      ymm11, ymm6, 26
        vpand       ymm1, ymm6, ymm15
        vpaddq      ymm7, ymm7, ymm11                   /* d2 += d1 >> 26 */
        vpsrlq      ymm10, ymm7, 26
        vpand       ymm2, ymm7, ymm15
        vpaddq      ymm8, ymm8, ymm10                   /* d3 += d2 >> 26 */
        vpsrlq      ymm11, ymm8, 26
        vpand       ymm3, ymm8, ymm15
        vpaddq      ymm9, ymm9, ymm11                   /* d4 += d3 >> 26 */
        vpsrlq      ymm10, ymm9, 26
        vpand       ymm4, ymm9, ymm15
        vpaddq      ymm0, ymm0, ymm10
        vpsllq      ymm10, ymm10, 2
        vpaddq      ymm0, ymm0, ymm10                   /* h0 += 5 * (d4 >> 26): 2^130 = 5 */
        vpsrlq      ymm11, ymm0, 26
        vpand       ymm0, ymm0, ymm15
        vpaddq      ymm1, ymm1, ymm11                   /* h1 += h0 >> 26 */
.endm

/* xmm d (64-bit lanes of ymm d summed) -> gpr: one column of the last group. */
.macro POLY_HSUM d, x, gpr
        vextracti128 xmm10, \d, 1
        vpaddq      \x, \x, xmm10
        vpunpckhqdq xmm10, \x, \x
        vpaddq      \x, \x, xmm10
        vmovq       \gpr, \x
.endm

/* a += b >> 26, b &= M26 (one step of the full carry chain; rax scratch). */
.macro POLY_CARRY b, a
        mov     rax, \b
        shr     rax, 26
        and     \b, M26
        add     \a, rax
.endm

        .p2align 4
.Lpoly_avx2:
        push    rbx
        push    rbp
        push    r12
        push    r13
        push    r14
        push    rdx                             /* acc, at [rbp + 8] */
        push    rcx                             /* r, at [rbp] */
        mov     rbp, rsp
        sub     rsp, 672
        and     rsp, -32

        POLY_LOAD_R

        /* powers in radix 2^64 into X (rsp+576: word 0 of lanes 0..3, then words 1, 2), lane
         * order (r^4, r^2, r^3, r^1) */
        mov     [rsp + 576 + 24], r8
        mov     [rsp + 608 + 24], r9
        mov     qword ptr [rsp + 640 + 24], 0
        mov     r11, r8
        mov     rcx, r9
        xor     ebx, ebx
        POLY_MULR                               /* r^2 */
        mov     [rsp + 576 + 8], r11
        mov     [rsp + 608 + 8], rcx
        mov     [rsp + 640 + 8], rbx
        POLY_MULR                               /* r^3 */
        mov     [rsp + 576 + 16], r11
        mov     [rsp + 608 + 16], rcx
        mov     [rsp + 640 + 16], rbx
        POLY_MULR                               /* r^4 */
        mov     [rsp + 576], r11
        mov     [rsp + 608], rcx
        mov     [rsp + 640], rbx

        /* split to 26-bit limbs: F (rsp+288) per lane, Q (rsp+0) = lane 0 (r^4) broadcast */
        mov     eax, M26
        vmovd   xmm15, eax
        vpbroadcastq ymm15, xmm15               /* 26-bit mask */
        mov     eax, 1 << 24
        vmovd   xmm14, eax
        vpbroadcastq ymm14, xmm14               /* 2^128 as bit 24 of limb 4 */
        vmovdqa ymm0, ymmword ptr [rsp + 576]
        vmovdqa ymm1, ymmword ptr [rsp + 608]
        vmovdqa ymm2, ymmword ptr [rsp + 640]
        vpand   ymm3, ymm0, ymm15               /* limb 0 = w0 & M26 */
        vpsrlq  ymm4, ymm0, 26
        vpand   ymm4, ymm4, ymm15               /* limb 1 = w0 >> 26 & M26 */
        vpsrlq  ymm5, ymm0, 52
        vpsllq  ymm6, ymm1, 12
        vpor    ymm5, ymm5, ymm6
        vpand   ymm5, ymm5, ymm15               /* limb 2 = (w0 >> 52 | w1 << 12) & M26 */
        vpsrlq  ymm6, ymm1, 14
        vpand   ymm6, ymm6, ymm15               /* limb 3 = w1 >> 14 & M26 */
        vpsrlq  ymm7, ymm1, 40
        vpsllq  ymm8, ymm2, 24
        vpor    ymm7, ymm7, ymm8                /* limb 4 = w1 >> 40 | w2 << 24 (<= 2^26) */
        vmovdqa ymmword ptr [rsp + 288], ymm3
        vmovdqa ymmword ptr [rsp + 320], ymm4
        vmovdqa ymmword ptr [rsp + 352], ymm5
        vmovdqa ymmword ptr [rsp + 384], ymm6
        vmovdqa ymmword ptr [rsp + 416], ymm7
        vpermq  ymm9, ymm3, 0
        vmovdqa ymmword ptr [rsp], ymm9
        vpsllq  ymm9, ymm4, 2
        vpaddq  ymm9, ymm9, ymm4         /* s1 = 5 r1 */
        vmovdqa ymmword ptr [rsp + 448], ymm9
        vpermq  ymm10, ymm4, 0
        vmovdqa ymmword ptr [rsp + 32], ymm10
        vpermq  ymm9, ymm9, 0
        vmovdqa ymmword ptr [rsp + 160], ymm9
        vpsllq  ymm9, ymm5, 2
        vpaddq  ymm9, ymm9, ymm5         /* s2 = 5 r2 */
        vmovdqa ymmword ptr [rsp + 480], ymm9
        vpermq  ymm10, ymm5, 0
        vmovdqa ymmword ptr [rsp + 64], ymm10
        vpermq  ymm9, ymm9, 0
        vmovdqa ymmword ptr [rsp + 192], ymm9
        vpsllq  ymm9, ymm6, 2
        vpaddq  ymm9, ymm9, ymm6         /* s3 = 5 r3 */
        vmovdqa ymmword ptr [rsp + 512], ymm9
        vpermq  ymm10, ymm6, 0
        vmovdqa ymmword ptr [rsp + 96], ymm10
        vpermq  ymm9, ymm9, 0
        vmovdqa ymmword ptr [rsp + 224], ymm9
        vpsllq  ymm9, ymm7, 2
        vpaddq  ymm9, ymm9, ymm7         /* s4 = 5 r4 */
        vmovdqa ymmword ptr [rsp + 544], ymm9
        vpermq  ymm10, ymm7, 0
        vmovdqa ymmword ptr [rsp + 128], ymm10
        vpermq  ymm9, ymm9, 0
        vmovdqa ymmword ptr [rsp + 256], ymm9

        /* h = [acc, 0, 0, 0] (VEX vmovq zeroes lanes 1..3) */
        mov     rdx, [rbp + 8]
        vmovq   xmm0, qword ptr [rdx]
        vmovq   xmm1, qword ptr [rdx + 8]
        vmovq   xmm2, qword ptr [rdx + 16]
        vmovq   xmm3, qword ptr [rdx + 24]
        vmovq   xmm4, qword ptr [rdx + 32]

        mov     rbx, rsi
        shr     rbx, 6                          /* G groups of four blocks (>= 1) */
        dec     rbx
        jz      .Lpoly_avx2_last
        .p2align 4
.Lpoly_avx2_loop:                               /* h = (h + m) * r^4, lazily reduced */
        POLY_ADD_BLOCKS
        POLY_VMUL 0
        POLY_VCARRY
        dec     rbx
        jnz     .Lpoly_avx2_loop
.Lpoly_avx2_last:                               /* d = (h + m) * (r^4, r^2, r^3, r^1) */
        POLY_ADD_BLOCKS
        POLY_VMUL 288
        POLY_HSUM ymm5, xmm5, r8
        POLY_HSUM ymm6, xmm6, r9
        POLY_HSUM ymm7, xmm7, r10
        POLY_HSUM ymm8, xmm8, r11
        POLY_HSUM ymm9, xmm9, r12
        vzeroupper

        /* full carry chain (each d < 2^62): limbs 0..3 < 2^26, limb 4 <= 2^26 */
        POLY_CARRY r8, r9
        POLY_CARRY r9, r10
        POLY_CARRY r10, r11
        POLY_CARRY r11, r12
        mov     rax, r12
        shr     rax, 26
        and     r12, M26
        lea     rax, [rax + 4 * rax]
        add     r8, rax                         /* 2^130 = 5 */
        POLY_CARRY r8, r9
        POLY_CARRY r9, r10
        POLY_CARRY r10, r11
        POLY_CARRY r11, r12
        mov     rdx, [rbp + 8]
        mov     [rdx], r8
        mov     [rdx + 8], r9
        mov     [rdx + 16], r10
        mov     [rdx + 24], r11
        mov     [rdx + 32], r12

        mov     rsp, rbp
        pop     rcx
        pop     rdx
        pop     r14
        pop     r13
        pop     r12
        pop     rbp
        pop     rbx
        and     rsi, 63                         /* 0..3 whole blocks (and a tail) left */
        jnz     .Lpoly_scalar                   /* rdi: the next block; rdx acc, rcx r */
        ret

#ifdef __AVX512IFMA__
/* ---- AVX-512 IFMA path: radix 2^44, eight blocks per iteration (header) ---- */

/* h (zmm0-2) += the eight blocks at [rdi] as 44-bit limbs, lanes (m0 m4 m1 m5 m2 m6 m3 m7);
 * rdi += 128. */
.macro POLY_ADD8
        vmovdqu64   zmm9, zmmword ptr [rdi]             /* m0 .. m3, one block per 128 bits */
        vmovdqu64   zmm10, zmmword ptr [rdi + 64]       /* m4 .. m7 */
        vpunpcklqdq zmm11, zmm9, zmm10                  /* lo words */
        vpunpckhqdq zmm12, zmm9, zmm10                  /* hi words */
        vpandq      zmm13, zmm11, zmm26
        vpaddq      zmm0, zmm0, zmm13                   /* limb 0 = lo & M44 */
        vpsrlq      zmm13, zmm11, 44
        vpsllq      zmm14, zmm12, 20
        vpternlogq  zmm13, zmm14, zmm26, 0xa8           /* (lo >> 44 | hi << 20) & M44 */
        vpaddq      zmm1, zmm1, zmm13                   /* limb 1 */
        vpsrlq      zmm14, zmm12, 24
        vporq       zmm14, zmm14, zmm28
        vpaddq      zmm2, zmm2, zmm14                   /* limb 2 = hi >> 24 | 2^40 (2^128) */
        add         rdi, 128
.endm

/* Low (zmm3-5) and high (zmm6-8) halves of the columns of h (zmm0-2) * the table r0 r1 r2
 * s1 s2 (s_j = 20 r_j: 2^132 = 20 mod p) in registers \R0 .. \S2:
 *   d0 = h0 r0 + h1 s2 + h2 s1,  d1 = h0 r1 + h1 r0 + h2 s2,  d2 = h0 r2 + h1 r1 + h2 r0;
 * vpmadd52luq adds bits 0..51 of each 52x52-bit product, vpmadd52huq bits 52..103. */
.macro POLY_MUL8 R0, R1, R2, S1, S2
        vpxord      xmm3, xmm3, xmm3
        vpxord      xmm4, xmm4, xmm4
        vpxord      xmm5, xmm5, xmm5
        vpxord      xmm6, xmm6, xmm6
        vpxord      xmm7, xmm7, xmm7
        vpxord      xmm8, xmm8, xmm8
        vpmadd52luq zmm3, zmm0, \R0
        vpmadd52huq zmm6, zmm0, \R0
        vpmadd52luq zmm4, zmm0, \R1
        vpmadd52huq zmm7, zmm0, \R1
        vpmadd52luq zmm5, zmm0, \R2
        vpmadd52huq zmm8, zmm0, \R2
        vpmadd52luq zmm3, zmm1, \S2
        vpmadd52huq zmm6, zmm1, \S2
        vpmadd52luq zmm4, zmm1, \R0
        vpmadd52huq zmm7, zmm1, \R0
        vpmadd52luq zmm5, zmm1, \R1
        vpmadd52huq zmm8, zmm1, \R1
        vpmadd52luq zmm3, zmm2, \S1
        vpmadd52huq zmm6, zmm2, \S1
        vpmadd52luq zmm4, zmm2, \S2
        vpmadd52huq zmm7, zmm2, \S2
        vpmadd52luq zmm5, zmm2, \R0
        vpmadd52huq zmm8, zmm2, \R0
.endm

/* Columns from the halves: a high half of column k weighs 2^(44k + 52) = 2^(44(k+1)) * 2^8,
 * and column 2's is 2^140 = 2^130 * 2^10 = 5 * 2^10 (mod p):
 *   t0 = lo0 + 5120 * hi2 (zmm3),  t1 = lo1 + hi0 << 8 (zmm4),  t2 = lo2 + hi1 << 8 (zmm5). */
.macro POLY_COLUMNS8
        vpsllq      zmm6, zmm6, 8
        vpaddq      zmm4, zmm4, zmm6
        vpsllq      zmm7, zmm7, 8
        vpaddq      zmm5, zmm5, zmm7
        vpsllq      zmm9, zmm8, 12
        vpsllq      zmm8, zmm8, 10
        vpaddq      zmm3, zmm3, zmm9
        vpaddq      zmm3, zmm3, zmm8
.endm

/* h (zmm0-2) = t (zmm3-5) lazily reduced: 0->1->2 and 2->0 times 5 (2^130 = 5), one pass. */
.macro POLY_CARRY8
        vpsrlq      zmm9, zmm3, 44
        vpandq      zmm0, zmm3, zmm26
        vpaddq      zmm4, zmm4, zmm9
        vpsrlq      zmm9, zmm4, 44
        vpandq      zmm1, zmm4, zmm26
        vpaddq      zmm5, zmm5, zmm9
        vpsrlq      zmm9, zmm5, 42
        vpandq      zmm2, zmm5, zmm27
        vpaddq      zmm0, zmm0, zmm9
        vpsllq      zmm9, zmm9, 2
        vpaddq      zmm0, zmm0, zmm9
.endm

/* gpr = the sum of zmm \n's eight lanes (xmm9 scratch). */
.macro POLY_HSUM8 n, gpr
        vextracti64x4 ymm9, zmm\n, 1
        vpaddq      ymm\n, ymm\n, ymm9
        vextracti128 xmm9, ymm\n, 1
        vpaddq      xmm\n, xmm\n, xmm9
        vpunpckhqdq xmm9, xmm\n, xmm\n
        vpaddq      xmm\n, xmm\n, xmm9
        vmovq       \gpr, xmm\n
.endm

/* a += b >> n, b &= mask (one step of the final carry chain; rax scratch). */
.macro POLY_CARRYN b, a, n, mask
        mov     rax, \b
        shr     rax, \n
        and     \b, \mask
        add     \a, rax
.endm

        .p2align 4
.Lpoly_ifma:
        push    rbx
        push    rbp
        push    r12
        push    r13
        push    r14
        push    rdx                             /* acc, at [rbp + 8] */
        push    rcx                             /* r, at [rbp] */
        mov     rbp, rsp
        sub     rsp, 192
        and     rsp, -64

        POLY_LOAD_R
        /* r^1 .. r^8 in radix 2^64 into X (rsp: word 0 of lanes 0..7, rsp+64 word 1, rsp+128
         * word 2), lane order (r^8, r^4, r^7, r^3, r^6, r^2, r^5, r^1) */
        mov     [rsp + 56], r8
        mov     [rsp + 64 + 56], r9
        mov     qword ptr [rsp + 128 + 56], 0
        mov     r11, r8
        mov     rcx, r9
        xor     ebx, ebx
        .irp    lane, 40, 24, 8, 48, 32, 16, 0          /* r^2 .. r^8 */
        POLY_MULR
        mov     [rsp + \lane], r11
        mov     [rsp + 64 + \lane], rcx
        mov     [rsp + 128 + \lane], rbx
        .endr

        mov     rax, 0xfffffffffff
        vpbroadcastq zmm26, rax                 /* M44 */
        mov     rax, 0x3ffffffffff
        vpbroadcastq zmm27, rax                 /* M42 */
        mov     rax, 1 << 40
        vpbroadcastq zmm28, rax                 /* 2^128 as bit 40 of limb 2 */
        /* powers to 44-bit limbs: F = zmm21-25 (r0 r1 r2 s1 s2 per lane), Q = zmm16-20 (lane 0,
         * r^8, broadcast) */
        vmovdqa64   zmm0, zmmword ptr [rsp]
        vmovdqa64   zmm1, zmmword ptr [rsp + 64]
        vmovdqa64   zmm2, zmmword ptr [rsp + 128]
        vpandq      zmm21, zmm0, zmm26          /* r0 = w0 & M44 */
        vpsrlq      zmm22, zmm0, 44
        vpsllq      zmm9, zmm1, 20
        vpternlogq  zmm22, zmm9, zmm26, 0xa8    /* r1 = (w0 >> 44 | w1 << 20) & M44 */
        vpsrlq      zmm23, zmm1, 24
        vpsllq      zmm9, zmm2, 40
        vporq       zmm23, zmm23, zmm9          /* r2 = w1 >> 24 | w2 << 40 (< 2^42.4) */
        vpsllq      zmm24, zmm22, 4
        vpsllq      zmm9, zmm22, 2
        vpaddq      zmm24, zmm24, zmm9          /* s1 = 20 r1 */
        vpsllq      zmm25, zmm23, 4
        vpsllq      zmm9, zmm23, 2
        vpaddq      zmm25, zmm25, zmm9          /* s2 = 20 r2 */
        vpbroadcastq zmm16, xmm21
        vpbroadcastq zmm17, xmm22
        vpbroadcastq zmm18, xmm23
        vpbroadcastq zmm19, xmm24
        vpbroadcastq zmm20, xmm25

        /* h = [acc, 0 ...] in radix 2^44 (acc limbs within bounds: disjoint bit ranges) */
        mov     rdx, [rbp + 8]
        mov     r8, [rdx]
        mov     rax, [rdx + 8]
        shl     rax, 26
        or      r8, rax
        mov     rax, [rdx + 16]
        mov     r9, rax
        shl     rax, 52
        or      r8, rax                         /* w0 = l0 | l1<<26 | l2<<52 */
        shr     r9, 12
        mov     rax, [rdx + 24]
        shl     rax, 14
        or      r9, rax
        mov     rax, [rdx + 32]
        mov     r10, rax
        shl     rax, 40
        or      r9, rax                         /* w1 = l2>>12 | l3<<14 | l4<<40 */
        shr     r10, 24                         /* w2 = l4>>24 */
        mov     r13, 0xfffffffffff
        mov     rax, r8
        and     rax, r13
        vmovq   xmm0, rax                       /* h0 = w0 & M44 (EVEX/VEX vmovq zeroes lanes 1..7) */
        shr     r8, 44
        mov     rax, r9
        shl     rax, 20
        or      rax, r8
        and     rax, r13
        vmovq   xmm1, rax                       /* h1 = (w0 >> 44 | w1 << 20) & M44 */
        shr     r9, 24
        shl     r10, 40
        or      r9, r10
        vmovq   xmm2, r9                        /* h2 = w1 >> 24 | w2 << 40 (< 2^43) */

        mov     rbx, rsi
        shr     rbx, 7                          /* groups of eight blocks (>= 1) */
        dec     rbx
        jz      .Lpoly_ifma_last
        .p2align 4
.Lpoly_ifma_loop:                               /* h = (h + m) * r^8, lazily reduced */
        POLY_ADD8
        POLY_MUL8 zmm16, zmm17, zmm18, zmm19, zmm20
        POLY_COLUMNS8
        POLY_CARRY8
        dec     rbx
        jnz     .Lpoly_ifma_loop
.Lpoly_ifma_last:   /* t = (h + m) * (r^8, r^4, r^7, r^3, r^6, r^2, r^5, r^1), lanes summed */
        POLY_ADD8
        POLY_MUL8 zmm21, zmm22, zmm23, zmm24, zmm25
        POLY_COLUMNS8
        POLY_HSUM8 3, r8
        POLY_HSUM8 4, r9
        POLY_HSUM8 5, r10
        vzeroupper

        /* two carry passes (t_k < 8 * 2^55.9 < 2^59): t0, t1 < 2^44, t2 <= 2^42, so
         * h < 2^130 + 2^88 and limb 4 = t2 >> 16 <= 2^26 */
        mov     r12, 0x3ffffffffff
        POLY_CARRYN r8, r9, 44, r13
        POLY_CARRYN r9, r10, 44, r13
        mov     rax, r10
        shr     rax, 42
        and     r10, r12
        lea     rax, [rax + 4 * rax]
        add     r8, rax                         /* 2^130 = 5 */
        POLY_CARRYN r8, r9, 44, r13
        POLY_CARRYN r9, r10, 44, r13

        /* radix 2^44 -> 26-bit limbs */
        mov     rdx, [rbp + 8]
        mov     rax, r8
        and     eax, M26
        mov     [rdx], rax                      /* bits 0..25 */
        mov     rax, r8
        shr     rax, 26
        mov     r11, r9
        shl     r11, 18
        or      rax, r11
        and     eax, M26
        mov     [rdx + 8], rax                  /* bits 26..51 */
        mov     rax, r9
        shr     rax, 8
        and     eax, M26
        mov     [rdx + 16], rax                 /* bits 52..77 */
        mov     rax, r9
        shr     rax, 34
        mov     r11, r10
        shl     r11, 10
        or      rax, r11
        and     eax, M26
        mov     [rdx + 24], rax                 /* bits 78..103 */
        shr     r10, 16
        mov     [rdx + 32], r10                 /* bits 104.. (<= 2^26) */

        mov     rsp, rbp
        pop     rcx
        pop     rdx
        pop     r14
        pop     r13
        pop     r12
        pop     rbp
        pop     rbx
        and     rsi, 127                        /* 0..7 whole blocks (and a tail) left */
        jnz     .Lpoly_scalar                   /* rdi: the next block; rdx acc, rcx r */
        ret
#endif
#endif
        .size   poly1305_processBlocks, . - poly1305_processBlocks
