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

        .text
        .globl  poly1305_processBlocks
        .type   poly1305_processBlocks, @function
        .p2align 4
poly1305_processBlocks:
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

        /* r = r0 + r1*2^64 and s1 = 5*(r1/4), as the scalar entry does */
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
#endif
        .size   poly1305_processBlocks, . - poly1305_processBlocks
