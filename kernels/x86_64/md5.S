/*
 * MD5 compression, x86_64 baseline (no BMI, no AVX): the HotSpot intrinsic contracts
 *
 *   void    md5_implCompress  (const uint8_t *buf, uint32_t state[4]);
 *   int32_t md5_implCompressMB(const uint8_t *buf, uint32_t state[4], int32_t ofs, int32_t limit);
 *           do { compress(buf); buf += 64; ofs += 64; } while (ofs <= limit); return ofs;
 *
 * Algorithm: RFC 1321 §3.4 (four rounds of 16 steps; the sine table T[i] and the per-step
 * shift amounts s below are copied from §3.4; T[i] = floor(2^32 * |sin(i)|)).
 *
 * Register use (SysV x86-64 psABI §3.2.3: all of these are caller-saved, so no callee-saved
 * register is touched and nothing is spilled):
 *   rdi  buf (any byte alignment; x86 loads need none)     rsi  state
 *   edx  ofs      ecx  limit   (32-bit ints: only 32-bit operations, the upper halves of
 *                               rdx/rcx are garbage per the psABI)
 *   r8d..r11d  the working variables a, b, c, d            eax  the round function
 * The state words themselves serve as the copy of a..d taken at the start of each block.
 *
 * Order within a step: X[k] is added to a first, while a does not yet depend on b (the value
 * the previous step has just produced), so the chain from b to the new a is only
 * fun (2 instructions) -> lea -> rol -> add.  (Adding X[k] after the lea put a load-add on that
 * chain: about 20% slower natively at 16 KiB in `lab bench`, same instruction count.)
 *
 * Round 2 adds its two disjoint terms separately (see G_STEP): the chain from b is 2 shorter
 * there, for 2 more instructions per step.  `lab bench`, native, CPU time, 16 KiB digests on
 * an AMD EPYC (Zen 5, CPU family 26): 1.39 ns/B before (0.98x OpenSSL 3.0.19's md5-x86_64), 1.25-1.28 after
 * (1.06-1.08x); llvm-mca-19 cycles per block 388 -> 356 (znver3/4), 341 -> 293 (skylake).
 * Moving T[i] out of the lea as well (add imm32 before b is known: 64 more instructions)
 * lowers the znver prediction to 292 but measured the same natively, so it is not done.
 *
 * Cost per 64-byte block: 8 instructions per step in rounds 1 and 4, 10 in round 2, 6 in
 * round 3 (plus 2 to seed its chain), + 8 to add the block into the state + 4 of loop
 * control = 526 instructions.
 */
        .intel_syntax noprefix

#define RA r8
#define RB r9
#define RC r10
#define RD r11

/*
 * One step, RFC 1321 §3.4:  a = b + ((a + fun(b,c,d) + X[k] + T[i]) <<< s).
 * `lea` adds fun() and T[i] in one instruction; its displacement is T[i] as a 32-bit
 * immediate (sign-extended by the CPU; only the low 32 bits of the sum are kept, which is
 * exactly the mod 2^32 addition MD5 wants). X[k] is added straight from memory, first
 * (see the header: off the critical path).
 * Arguments are the 64-bit names r8..r11; \a\()d is the 32-bit name.
 */

/* Round 1: F(b,c,d) = (b & c) | (~b & d) = d ^ (b & (c ^ d)) */
.macro F_STEP a, b, c, d, k, s, t
        add     \a\()d, dword ptr [rdi + 4 * \k]
        mov     eax, \c\()d
        xor     eax, \d\()d
        and     eax, \b\()d
        xor     eax, \d\()d
        lea     \a\()d, [\a + rax + \t]
        rol     \a\()d, \s
        add     \a\()d, \b\()d
.endm

/* Round 2: G(b,c,d) = (b & d) | (c & ~d).  The two terms are disjoint, so G is their sum, and
 * c & ~d does not depend on b: it goes into a before b is known, and the chain from b is only
 * and -> add -> rol -> add (4 instead of 6 for c ^ (d & (b ^ c))), for 2 more instructions. */
.macro G_STEP a, b, c, d, k, s, t
        add     \a\()d, dword ptr [rdi + 4 * \k]
        mov     eax, \d\()d
        not     eax
        and     eax, \c\()d
        add     \a\()d, eax
        mov     eax, \d\()d
        and     eax, \b\()d
        lea     \a\()d, [\a + rax + \t]
        rol     \a\()d, \s
        add     \a\()d, \b\()d
.endm

/* Round 3: H(b,c,d) = b ^ c ^ d.  Expects eax = c ^ d on entry.  The next step works on
 * (d, a, b, c), so it needs b ^ c = (b ^ c ^ d) ^ d in eax: one xor keeps the chain going. */
.macro H_STEP a, b, c, d, k, s, t
        add     \a\()d, dword ptr [rdi + 4 * \k]
        xor     eax, \b\()d
        lea     \a\()d, [\a + rax + \t]
        xor     eax, \d\()d
        rol     \a\()d, \s
        add     \a\()d, \b\()d
.endm

/* Round 4: I(b,c,d) = c ^ (b | ~d) */
.macro I_STEP a, b, c, d, k, s, t
        add     \a\()d, dword ptr [rdi + 4 * \k]
        mov     eax, \d\()d
        not     eax
        or      eax, \b\()d
        xor     eax, \c\()d
        lea     \a\()d, [\a + rax + \t]
        rol     \a\()d, \s
        add     \a\()d, \b\()d
.endm

        .text

/* void md5_implCompress(buf, state): one block = the MB loop with ofs = limit = 0
 * (ofs becomes 64 > 0 after the first block, so exactly one block runs). */
        .globl  md5_implCompress
        .type   md5_implCompress, @function
        .p2align 4
md5_implCompress:
        xor     edx, edx
        xor     ecx, ecx
        jmp     md5_implCompressMB
        .size   md5_implCompress, . - md5_implCompress

        .globl  md5_implCompressMB
        .type   md5_implCompressMB, @function
        .p2align 4
md5_implCompressMB:
        mov     r8d, dword ptr [rsi]            /* a, b, c, d = state */
        mov     r9d, dword ptr [rsi + 4]
        mov     r10d, dword ptr [rsi + 8]
        mov     r11d, dword ptr [rsi + 12]

        .p2align 4
.Lmd5_block:
        /*        a   b   c   d   k   s  T[i]              RFC 1321 §3.4 */
        /* Round 1: [abcd k s i], X[k] for k = i - 1 */
        F_STEP RA, RB, RC, RD,  0,  7, 0xd76aa478   /* step  1 */
        F_STEP RD, RA, RB, RC,  1, 12, 0xe8c7b756   /* step  2 */
        F_STEP RC, RD, RA, RB,  2, 17, 0x242070db   /* step  3 */
        F_STEP RB, RC, RD, RA,  3, 22, 0xc1bdceee   /* step  4 */
        F_STEP RA, RB, RC, RD,  4,  7, 0xf57c0faf   /* step  5 */
        F_STEP RD, RA, RB, RC,  5, 12, 0x4787c62a   /* step  6 */
        F_STEP RC, RD, RA, RB,  6, 17, 0xa8304613   /* step  7 */
        F_STEP RB, RC, RD, RA,  7, 22, 0xfd469501   /* step  8 */
        F_STEP RA, RB, RC, RD,  8,  7, 0x698098d8   /* step  9 */
        F_STEP RD, RA, RB, RC,  9, 12, 0x8b44f7af   /* step 10 */
        F_STEP RC, RD, RA, RB, 10, 17, 0xffff5bb1   /* step 11 */
        F_STEP RB, RC, RD, RA, 11, 22, 0x895cd7be   /* step 12 */
        F_STEP RA, RB, RC, RD, 12,  7, 0x6b901122   /* step 13 */
        F_STEP RD, RA, RB, RC, 13, 12, 0xfd987193   /* step 14 */
        F_STEP RC, RD, RA, RB, 14, 17, 0xa679438e   /* step 15 */
        F_STEP RB, RC, RD, RA, 15, 22, 0x49b40821   /* step 16 */

        /* Round 2: X[k] for k = (1 + 5(i-17)) mod 16 */
        G_STEP RA, RB, RC, RD,  1,  5, 0xf61e2562   /* step 17 */
        G_STEP RD, RA, RB, RC,  6,  9, 0xc040b340   /* step 18 */
        G_STEP RC, RD, RA, RB, 11, 14, 0x265e5a51   /* step 19 */
        G_STEP RB, RC, RD, RA,  0, 20, 0xe9b6c7aa   /* step 20 */
        G_STEP RA, RB, RC, RD,  5,  5, 0xd62f105d   /* step 21 */
        G_STEP RD, RA, RB, RC, 10,  9, 0x02441453   /* step 22 */
        G_STEP RC, RD, RA, RB, 15, 14, 0xd8a1e681   /* step 23 */
        G_STEP RB, RC, RD, RA,  4, 20, 0xe7d3fbc8   /* step 24 */
        G_STEP RA, RB, RC, RD,  9,  5, 0x21e1cde6   /* step 25 */
        G_STEP RD, RA, RB, RC, 14,  9, 0xc33707d6   /* step 26 */
        G_STEP RC, RD, RA, RB,  3, 14, 0xf4d50d87   /* step 27 */
        G_STEP RB, RC, RD, RA,  8, 20, 0x455a14ed   /* step 28 */
        G_STEP RA, RB, RC, RD, 13,  5, 0xa9e3e905   /* step 29 */
        G_STEP RD, RA, RB, RC,  2,  9, 0xfcefa3f8   /* step 30 */
        G_STEP RC, RD, RA, RB,  7, 14, 0x676f02d9   /* step 31 */
        G_STEP RB, RC, RD, RA, 12, 20, 0x8d2a4c8a   /* step 32 */

        /* Round 3: X[k] for k = (5 + 3(i-33)) mod 16; seed the H chain with c ^ d */
        mov     eax, r10d
        xor     eax, r11d
        H_STEP RA, RB, RC, RD,  5,  4, 0xfffa3942   /* step 33 */
        H_STEP RD, RA, RB, RC,  8, 11, 0x8771f681   /* step 34 */
        H_STEP RC, RD, RA, RB, 11, 16, 0x6d9d6122   /* step 35 */
        H_STEP RB, RC, RD, RA, 14, 23, 0xfde5380c   /* step 36 */
        H_STEP RA, RB, RC, RD,  1,  4, 0xa4beea44   /* step 37 */
        H_STEP RD, RA, RB, RC,  4, 11, 0x4bdecfa9   /* step 38 */
        H_STEP RC, RD, RA, RB,  7, 16, 0xf6bb4b60   /* step 39 */
        H_STEP RB, RC, RD, RA, 10, 23, 0xbebfbc70   /* step 40 */
        H_STEP RA, RB, RC, RD, 13,  4, 0x289b7ec6   /* step 41 */
        H_STEP RD, RA, RB, RC,  0, 11, 0xeaa127fa   /* step 42 */
        H_STEP RC, RD, RA, RB,  3, 16, 0xd4ef3085   /* step 43 */
        H_STEP RB, RC, RD, RA,  6, 23, 0x04881d05   /* step 44 */
        H_STEP RA, RB, RC, RD,  9,  4, 0xd9d4d039   /* step 45 */
        H_STEP RD, RA, RB, RC, 12, 11, 0xe6db99e5   /* step 46 */
        H_STEP RC, RD, RA, RB, 15, 16, 0x1fa27cf8   /* step 47 */
        H_STEP RB, RC, RD, RA,  2, 23, 0xc4ac5665   /* step 48 */

        /* Round 4: X[k] for k = 7(i-49) mod 16 */
        I_STEP RA, RB, RC, RD,  0,  6, 0xf4292244   /* step 49 */
        I_STEP RD, RA, RB, RC,  7, 10, 0x432aff97   /* step 50 */
        I_STEP RC, RD, RA, RB, 14, 15, 0xab9423a7   /* step 51 */
        I_STEP RB, RC, RD, RA,  5, 21, 0xfc93a039   /* step 52 */
        I_STEP RA, RB, RC, RD, 12,  6, 0x655b59c3   /* step 53 */
        I_STEP RD, RA, RB, RC,  3, 10, 0x8f0ccc92   /* step 54 */
        I_STEP RC, RD, RA, RB, 10, 15, 0xffeff47d   /* step 55 */
        I_STEP RB, RC, RD, RA,  1, 21, 0x85845dd1   /* step 56 */
        I_STEP RA, RB, RC, RD,  8,  6, 0x6fa87e4f   /* step 57 */
        I_STEP RD, RA, RB, RC, 15, 10, 0xfe2ce6e0   /* step 58 */
        I_STEP RC, RD, RA, RB,  6, 15, 0xa3014314   /* step 59 */
        I_STEP RB, RC, RD, RA, 13, 21, 0x4e0811a1   /* step 60 */
        I_STEP RA, RB, RC, RD,  4,  6, 0xf7537e82   /* step 61 */
        I_STEP RD, RA, RB, RC, 11, 10, 0xbd3af235   /* step 62 */
        I_STEP RC, RD, RA, RB,  2, 15, 0x2ad7d2bb   /* step 63 */
        I_STEP RB, RC, RD, RA,  9, 21, 0xeb86d391   /* step 64 */

        /* RFC 1321 §3.4: A = A + AA, ... (the state words are AA..DD) */
        add     r8d, dword ptr [rsi]
        mov     dword ptr [rsi], r8d
        add     r9d, dword ptr [rsi + 4]
        mov     dword ptr [rsi + 4], r9d
        add     r10d, dword ptr [rsi + 8]
        mov     dword ptr [rsi + 8], r10d
        add     r11d, dword ptr [rsi + 12]
        mov     dword ptr [rsi + 12], r11d

        /* do { ... } while (ofs <= limit): signed 32-bit compare, as in Java */
        add     rdi, 64
        add     edx, 64
        cmp     edx, ecx
        jle     .Lmd5_block

        mov     eax, edx                        /* return ofs */
        ret
        .size   md5_implCompressMB, . - md5_implCompressMB
