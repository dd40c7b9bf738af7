// MD5 compression (RFC 1321 §3.4) for aarch64, ARMv8.0-A base ISA, scalar.
//
//   void    md5_implCompress  (const uint8_t *buf, uint32_t state[4])
//   int32_t md5_implCompressMB(const uint8_t *buf, uint32_t state[4], int32_t ofs, int32_t limit)
//
// implCompressMB is the HotSpot contract: do { compress(buf); buf += 64; ofs += 64; }
// while (ofs <= limit); return ofs. implCompress is one block of the same loop (ofs = limit = 0).
//
// Register use (AAPCS64 §6.1.1): arguments x0-x3; x4-x17 are caller-saved scratch; the kernel
// also needs x19-x21, which are callee-saved and therefore spilled to a 32-byte frame
// (sp stays 16-byte aligned). No other memory is touched than the 64-byte blocks of buf, the
// 16 bytes of state, T and that frame. x18 (platform register) is not used.
//
//   x0  buf (advances 64 per block)     w2 ofs, w3 limit: 32-bit ints, only the w forms are
//   x1  state                           used (the upper halves of x2/x3 are unspecified)
//   x4  &md5_T                          w5-w8   a, b, c, d
//   x9-x16  the block X[0..15], two words per register: X[2j] in bits 0-31 of x(9+j),
//           X[2j+1] in bits 32-63. aarch64 Linux allows unaligned ldp on normal memory
//           (and so do the emulators), so buf at any byte alignment is loaded with plain ldp.
//   x20-x21 four T[i] at a time (same packing), w17, w19 temporaries.
//
// Cheap halves: every step adds X[k] and T[i] with a 64-bit add, either of the whole
// register (its low half is the word wanted; the high half only pollutes bits 32-63 of `a`)
// or of the register shifted right by 32. Only the low 32 bits of `a` matter: the rotate is
// the 32-bit `ror w`, which ignores (and clears) bits 32-63. So no word ever needs extracting.
//
// Cost per 64-byte block (the MB loop body, straight-line): 511 instructions =
// 4 ldp (X) + 16 ldp (T) + 16*8 (F) + 16*8 (G) + 16*7 (H) + 16*7 (I) + 8 (state) + 3 (loop).

// Working registers a, b, c, d (numbers, pasted into w<n>/x<n> by the step macros).
#define A 5
#define B 6
#define C 7
#define D 8

// X(k): register number and shift that bring X[k] into bits 0-31.
#define X(k) X_##k
#define X_0  9, 0
#define X_1  9, 32
#define X_2  10, 0
#define X_3  10, 32
#define X_4  11, 0
#define X_5  11, 32
#define X_6  12, 0
#define X_7  12, 32
#define X_8  13, 0
#define X_9  13, 32
#define X_10 14, 0
#define X_11 14, 32
#define X_12 15, 0
#define X_13 15, 32
#define X_14 16, 0
#define X_15 16, 32

// T0..T3: the four T words loaded by the last LOADT.
#define T0 20, 0
#define T1 20, 32
#define T2 21, 0
#define T3 21, 32

// LOADT i: x20/x21 = T[i+1..i+4] (RFC numbering is 1-based; i is the 0-based step).
.macro LOADT i
    ldp     x20, x21, [x4, #(\i * 4)]
.endm

// a += X[k] + T[i] (low 32 bits), the first half of every step.
.macro ADDXT a, xr, xs, tr, ts
  .if \xs
    add     x\a, x\a, x\xr, lsr #32
  .else
    add     x\a, x\a, x\xr
  .endif
  .if \ts
    add     x\a, x\a, x\tr, lsr #32
  .else
    add     x\a, x\a, x\tr
  .endif
.endm

// Round 1: a = b + ((a + F(b,c,d) + X[k] + T[i]) <<< s), F = (b & c) | (~b & d),
// computed as d ^ (b & (c ^ d)) (one temporary, same count as and/bic/orr).
.macro FF a, b, c, d, xr, xs, tr, ts, s
    ADDXT   \a, \xr, \xs, \tr, \ts
    eor     w17, w\c, w\d
    and     w17, w17, w\b
    eor     w17, w17, w\d
    add     w\a, w\a, w17
    ror     w\a, w\a, #(32 - \s)
    add     w\a, w\a, w\b
.endm

// Round 2: G = (b & d) | (c & ~d). The two terms have no common bits, so G is their sum:
// c & ~d does not depend on b (the newest value) and is added first.
.macro GG a, b, c, d, xr, xs, tr, ts, s
    ADDXT   \a, \xr, \xs, \tr, \ts
    bic     w17, w\c, w\d
    and     w19, w\b, w\d
    add     w\a, w\a, w17
    add     w\a, w\a, w19
    ror     w\a, w\a, #(32 - \s)
    add     w\a, w\a, w\b
.endm

// Round 3: H = b ^ c ^ d.
.macro HH a, b, c, d, xr, xs, tr, ts, s
    ADDXT   \a, \xr, \xs, \tr, \ts
    eor     w17, w\c, w\d
    eor     w17, w17, w\b
    add     w\a, w\a, w17
    ror     w\a, w\a, #(32 - \s)
    add     w\a, w\a, w\b
.endm

// Round 4: I = c ^ (b | ~d); orn gives b | ~d in one instruction.
.macro II a, b, c, d, xr, xs, tr, ts, s
    ADDXT   \a, \xr, \xs, \tr, \ts
    orn     w17, w\b, w\d
    eor     w17, w17, w\c
    add     w\a, w\a, w17
    ror     w\a, w\a, #(32 - \s)
    add     w\a, w\a, w\b
.endm

    .text

// void md5_implCompress(const uint8_t *buf, uint32_t state[4])
    .globl  md5_implCompress
    .type   md5_implCompress, %function
    .balign 16
md5_implCompress:
    mov     w2, #0                          // ofs = limit = 0: exactly one block
    mov     w3, #0
    // falls through into md5_implCompressMB
    .size   md5_implCompress, . - md5_implCompress

// int32_t md5_implCompressMB(const uint8_t *buf, uint32_t state[4], int32_t ofs, int32_t limit)
    .globl  md5_implCompressMB
    .type   md5_implCompressMB, %function
md5_implCompressMB:
    stp     x19, x20, [sp, #-32]!
    str     x21, [sp, #16]
    adrp    x4, md5_T
    add     x4, x4, :lo12:md5_T
    ldp     w5, w6, [x1]                    // a, b, c, d = state
    ldp     w7, w8, [x1, #8]

.Lmd5_block:                                // one 64-byte block per iteration
    ldp     x9,  x10, [x0], #16             // X[0..15], little-endian words
    ldp     x11, x12, [x0], #16
    ldp     x13, x14, [x0], #16
    ldp     x15, x16, [x0], #16
    // The 64 steps of RFC 1321 §3.4: [abcd k s i] with k, s and T[i] as in the RFC;
    // the shifts s per round are 7,12,17,22 / 5,9,14,20 / 4,11,16,23 / 6,10,15,21.

    // Round 1, F
    LOADT   0
    FF      A, B, C, D, X(0),  T0,  7     // step  1: X[ 0], T[ 1] = 0xd76aa478
    FF      D, A, B, C, X(1),  T1, 12     // step  2: X[ 1], T[ 2] = 0xe8c7b756
    FF      C, D, A, B, X(2),  T2, 17     // step  3: X[ 2], T[ 3] = 0x242070db
    FF      B, C, D, A, X(3),  T3, 22     // step  4: X[ 3], T[ 4] = 0xc1bdceee
    LOADT   4
    FF      A, B, C, D, X(4),  T0,  7     // step  5: X[ 4], T[ 5] = 0xf57c0faf
    FF      D, A, B, C, X(5),  T1, 12     // step  6: X[ 5], T[ 6] = 0x4787c62a
    FF      C, D, A, B, X(6),  T2, 17     // step  7: X[ 6], T[ 7] = 0xa8304613
    FF      B, C, D, A, X(7),  T3, 22     // step  8: X[ 7], T[ 8] = 0xfd469501
    LOADT   8
    FF      A, B, C, D, X(8),  T0,  7     // step  9: X[ 8], T[ 9] = 0x698098d8
    FF      D, A, B, C, X(9),  T1, 12     // step 10: X[ 9], T[10] = 0x8b44f7af
    FF      C, D, A, B, X(10), T2, 17     // step 11: X[10], T[11] = 0xffff5bb1
    FF      B, C, D, A, X(11), T3, 22     // step 12: X[11], T[12] = 0x895cd7be
    LOADT   12
    FF      A, B, C, D, X(12), T0,  7     // step 13: X[12], T[13] = 0x6b901122
    FF      D, A, B, C, X(13), T1, 12     // step 14: X[13], T[14] = 0xfd987193
    FF      C, D, A, B, X(14), T2, 17     // step 15: X[14], T[15] = 0xa679438e
    FF      B, C, D, A, X(15), T3, 22     // step 16: X[15], T[16] = 0x49b40821

    // Round 2, G
    LOADT   16
    GG      A, B, C, D, X(1),  T0,  5     // step 17: X[ 1], T[17] = 0xf61e2562
    GG      D, A, B, C, X(6),  T1,  9     // step 18: X[ 6], T[18] = 0xc040b340
    GG      C, D, A, B, X(11), T2, 14     // step 19: X[11], T[19] = 0x265e5a51
    GG      B, C, D, A, X(0),  T3, 20     // step 20: X[ 0], T[20] = 0xe9b6c7aa
    LOADT   20
    GG      A, B, C, D, X(5),  T0,  5     // step 21: X[ 5], T[21] = 0xd62f105d
    GG      D, A, B, C, X(10), T1,  9     // step 22: X[10], T[22] = 0x02441453
    GG      C, D, A, B, X(15), T2, 14     // step 23: X[15], T[23] = 0xd8a1e681
    GG      B, C, D, A, X(4),  T3, 20     // step 24: X[ 4], T[24] = 0xe7d3fbc8
    LOADT   24
    GG      A, B, C, D, X(9),  T0,  5     // step 25: X[ 9], T[25] = 0x21e1cde6
    GG      D, A, B, C, X(14), T1,  9     // step 26: X[14], T[26] = 0xc33707d6
    GG      C, D, A, B, X(3),  T2, 14     // step 27: X[ 3], T[27] = 0xf4d50d87
    GG      B, C, D, A, X(8),  T3, 20     // step 28: X[ 8], T[28] = 0x455a14ed
    LOADT   28
    GG      A, B, C, D, X(13), T0,  5     // step 29: X[13], T[29] = 0xa9e3e905
    GG      D, A, B, C, X(2),  T1,  9     // step 30: X[ 2], T[30] = 0xfcefa3f8
    GG      C, D, A, B, X(7),  T2, 14     // step 31: X[ 7], T[31] = 0x676f02d9
    GG      B, C, D, A, X(12), T3, 20     // step 32: X[12], T[32] = 0x8d2a4c8a

    // Round 3, H
    LOADT   32
    HH      A, B, C, D, X(5),  T0,  4     // step 33: X[ 5], T[33] = 0xfffa3942
    HH      D, A, B, C, X(8),  T1, 11     // step 34: X[ 8], T[34] = 0x8771f681
    HH      C, D, A, B, X(11), T2, 16     // step 35: X[11], T[35] = 0x6d9d6122
    HH      B, C, D, A, X(14), T3, 23     // step 36: X[14], T[36] = 0xfde5380c
    LOADT   36
    HH      A, B, C, D, X(1),  T0,  4     // step 37: X[ 1], T[37] = 0xa4beea44
    HH      D, A, B, C, X(4),  T1, 11     // step 38: X[ 4], T[38] = 0x4bdecfa9
    HH      C, D, A, B, X(7),  T2, 16     // step 39: X[ 7], T[39] = 0xf6bb4b60
    HH      B, C, D, A, X(10), T3, 23     // step 40: X[10], T[40] = 0xbebfbc70
    LOADT   40
    HH      A, B, C, D, X(13), T0,  4     // step 41: X[13], T[41] = 0x289b7ec6
    HH      D, A, B, C, X(0),  T1, 11     // step 42: X[ 0], T[42] = 0xeaa127fa
    HH      C, D, A, B, X(3),  T2, 16     // step 43: X[ 3], T[43] = 0xd4ef3085
    HH      B, C, D, A, X(6),  T3, 23     // step 44: X[ 6], T[44] = 0x04881d05
    LOADT   44
    HH      A, B, C, D, X(9),  T0,  4     // step 45: X[ 9], T[45] = 0xd9d4d039
    HH      D, A, B, C, X(12), T1, 11     // step 46: X[12], T[46] = 0xe6db99e5
    HH      C, D, A, B, X(15), T2, 16     // step 47: X[15], T[47] = 0x1fa27cf8
    HH      B, C, D, A, X(2),  T3, 23     // step 48: X[ 2], T[48] = 0xc4ac5665

    // Round 4, I
    LOADT   48
    II      A, B, C, D, X(0),  T0,  6     // step 49: X[ 0], T[49] = 0xf4292244
    II      D, A, B, C, X(7),  T1, 10     // step 50: X[ 7], T[50] = 0x432aff97
    II      C, D, A, B, X(14), T2, 15     // step 51: X[14], T[51] = 0xab9423a7
    II      B, C, D, A, X(5),  T3, 21     // step 52: X[ 5], T[52] = 0xfc93a039
    LOADT   52
    II      A, B, C, D, X(12), T0,  6     // step 53: X[12], T[53] = 0x655b59c3
    II      D, A, B, C, X(3),  T1, 10     // step 54: X[ 3], T[54] = 0x8f0ccc92
    II      C, D, A, B, X(10), T2, 15     // step 55: X[10], T[55] = 0xffeff47d
    II      B, C, D, A, X(1),  T3, 21     // step 56: X[ 1], T[56] = 0x85845dd1
    LOADT   56
    II      A, B, C, D, X(8),  T0,  6     // step 57: X[ 8], T[57] = 0x6fa87e4f
    II      D, A, B, C, X(15), T1, 10     // step 58: X[15], T[58] = 0xfe2ce6e0
    II      C, D, A, B, X(6),  T2, 15     // step 59: X[ 6], T[59] = 0xa3014314
    II      B, C, D, A, X(13), T3, 21     // step 60: X[13], T[60] = 0x4e0811a1
    LOADT   60
    II      A, B, C, D, X(4),  T0,  6     // step 61: X[ 4], T[61] = 0xf7537e82
    II      D, A, B, C, X(11), T1, 10     // step 62: X[11], T[62] = 0xbd3af235
    II      C, D, A, B, X(2),  T2, 15     // step 63: X[ 2], T[63] = 0x2ad7d2bb
    II      B, C, D, A, X(9),  T3, 21     // step 64: X[ 9], T[64] = 0xeb86d391
    // state += a, b, c, d; the new state stays in w5-w8 for the next block.
    ldp     w17, w19, [x1]
    add     w5, w5, w17
    add     w6, w6, w19
    ldp     w17, w19, [x1, #8]
    add     w7, w7, w17
    add     w8, w8, w19
    stp     w5, w6, [x1]
    stp     w7, w8, [x1, #8]

    add     w2, w2, #64                     // ofs += 64 (32-bit, signed compare)
    cmp     w2, w3
    b.le    .Lmd5_block

    mov     w0, w2                          // return ofs
    ldr     x21, [sp, #16]
    ldp     x19, x20, [sp], #32
    ret
    .size   md5_implCompressMB, . - md5_implCompressMB

// T[i] = floor(2^32 * |sin(i)|), i = 1..64, radians (RFC 1321 §3.4).
    .section .rodata
    .balign 16
    .type   md5_T, %object
md5_T:
    .word   0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee   // T[1..4]
    .word   0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501   // T[5..8]
    .word   0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be   // T[9..12]
    .word   0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821   // T[13..16]
    .word   0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa   // T[17..20]
    .word   0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8   // T[21..24]
    .word   0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed   // T[25..28]
    .word   0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a   // T[29..32]
    .word   0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c   // T[33..36]
    .word   0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70   // T[37..40]
    .word   0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05   // T[41..44]
    .word   0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665   // T[45..48]
    .word   0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039   // T[49..52]
    .word   0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1   // T[53..56]
    .word   0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1   // T[57..60]
    .word   0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391   // T[61..64]
    .size   md5_T, . - md5_T
