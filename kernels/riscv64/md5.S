/*
 * MD5 block compression for riscv64 (RV64GC, optional Zbb), HotSpot intrinsic contract
 * (kernels/README.md):
 *
 *   void    md5_implCompress(const uint8_t *buf, uint32_t state[4]);
 *   int32_t md5_implCompressMB(const uint8_t *buf, uint32_t state[4], int32_t ofs, int32_t limit);
 *           do { compress(buf); buf += 64; ofs += 64; } while (ofs <= limit); return ofs;
 *
 * Algorithm: RFC 1321 §3.4, four rounds of 16 steps
 *   a = b + ((a + f(b,c,d) + X[k] + T[i]) <<< s).
 *
 * Build variants (same source): -march=rv64gc (no Zbb instruction may appear) and
 * -march=rv64gc_zbb, selected with __riscv_zbb.  Zbb buys: roriw (1 instruction instead of
 * slliw/srliw/or for each rotate) and andn (round 4, one instruction fewer; round 2, the same
 * count but c & ~d leaves the critical path).  Round 1 keeps d ^ (b & (c ^ d)) in both builds
 * (3 instructions either way).
 *
 * Register use (RISC-V psABI, LP64D): all 16 message words live in registers for the whole
 * block, so no word is loaded twice.
 *   a0 buf   a1 state   a2 ofs   a3 limit   (ofs/limit arrive sign-extended per the psABI;
 *                                            addiw keeps int32 wrap-around semantics)
 *   a4-a7    working variables a, b, c, d (only their low 32 bits matter: every rotate
 *            reads the low word, and the final addw/sw use the low word, so adds can be
 *            64-bit and leave junk in the upper half)
 *   s0-s11, t3-t6   X[0..15]    (s0-s11 callee-saved: saved in a 96-byte frame)
 *   t2       pointer to md5_T
 *   t0, t1   temporaries
 *
 * Unaligned buf: RISC-V Linux allows misaligned loads, but real cores may trap and emulate
 * them slowly.  Alignment of buf never changes between blocks (buf += 64), and each block tests
 * buf & 3: 4-aligned input takes the fast path of 16 lw; any other alignment loads the 15
 * aligned words inside the block and shifts neighbours together (X[1..14]), and assembles
 * X[0] and X[15] from bytes: 87 instructions instead of 16 lw (was 161 with bytes only).
 * No load ever touches a byte outside buf[0..63] of the block being processed.
 *
 * Cost per 64-byte block in the MB loop (instructions executed, `lab bench`):
 *   aligned rv64gc 721, rv64gc_zbb 577; not 4-aligned 792 and 648.
 */
	.option norelax		/* ld.lld 14 implements no RISC-V relaxation */

#define BUF	a0
#define STATE	a1
#define OFS	a2
#define LIMIT	a3
#define A	a4
#define B	a5
#define C	a6
#define D	a7
#define TBL	t2
#define X0	s0
#define X1	s1
#define X2	s2
#define X3	s3
#define X4	s4
#define X5	s5
#define X6	s6
#define X7	s7
#define X8	s8
#define X9	s9
#define X10	s10
#define X11	s11
#define X12	t3
#define X13	t4
#define X14	t5
#define X15	t6

/* r = r <<< s on the low 32 bits (result sign-extended); clobbers t0 without Zbb. */
.macro ROTL r, s
#if defined(__riscv_zbb)
	roriw	\r, \r, 32 - \s
#else
	slliw	t0, \r, \s
	srliw	\r, \r, 32 - \s
	or	\r, \r, t0
#endif
.endm

/*
 * Round 1: F(b,c,d) = (b & c) | (~b & d) = d ^ (b & (c ^ d)).
 * 11 instructions (9 with Zbb).  The constant and X[k] go into a first: they do not depend
 * on b, the value the previous step has just produced.
 */
.macro FF a, b, c, d, x, s, i
	lw	t0, 4 * \i(TBL)
	add	\a, \a, \x
	xor	t1, \c, \d
	add	\a, \a, t0
	and	t1, t1, \b
	xor	t1, t1, \d
	add	\a, \a, t1
	ROTL	\a, \s
	add	\a, \a, \b
.endm

/*
 * Round 2: G(b,c,d) = (b & d) | (c & ~d).
 * Base: c ^ (d & (b ^ c)), 11 instructions.  Zbb: the two terms are disjoint, so
 * G = (b & d) + andn(c, d); andn does not wait for b.  9 instructions.
 */
.macro GG a, b, c, d, x, s, i
	lw	t0, 4 * \i(TBL)
	add	\a, \a, \x
#if defined(__riscv_zbb)
	andn	t1, \c, \d
	add	\a, \a, t0
	add	\a, \a, t1
	and	t1, \b, \d
	add	\a, \a, t1
#else
	xor	t1, \b, \c
	add	\a, \a, t0
	and	t1, t1, \d
	xor	t1, t1, \c
	add	\a, \a, t1
#endif
	ROTL	\a, \s
	add	\a, \a, \b
.endm

/* Round 3: H(b,c,d) = b ^ c ^ d.  10 instructions (8 with Zbb). */
.macro HH a, b, c, d, x, s, i
	lw	t0, 4 * \i(TBL)
	add	\a, \a, \x
	xor	t1, \c, \d
	add	\a, \a, t0
	xor	t1, t1, \b
	add	\a, \a, t1
	ROTL	\a, \s
	add	\a, \a, \b
.endm

/*
 * Round 4: I(b,c,d) = c ^ (b | ~d) = ~(c ^ (d & ~b))   (De Morgan: b | ~d = ~(~b & d)).
 * With ~Z = -Z - 1: a + I = a - (c ^ (d & ~b)) - 1, and the "- 1" is folded into the
 * round-4 constants of md5_T.  d & ~b is andn(d, b) with Zbb and d ^ (b & d) without.
 * 11 instructions (8 with Zbb) instead of 12 for the literal not/or/xor/add form.
 */
.macro II a, b, c, d, x, s, i
	lw	t0, 4 * \i(TBL)		/* T[i] - 1 */
	add	\a, \a, \x
	add	\a, \a, t0
#if defined(__riscv_zbb)
	andn	t1, \d, \b
	xor	t1, t1, \c
#else
	xor	t1, \c, \d
	and	t0, \b, \d
	xor	t1, t1, t0
#endif
	sub	\a, \a, t1
	ROTL	\a, \s
	add	\a, \a, \b
.endm

/* x = little-endian word at buf + off, any alignment: 4 lbu, 10 instructions. */
.macro LDB x, off
	lbu	\x, \off(BUF)
	lbu	t0, \off + 1(BUF)
	lbu	t1, \off + 2(BUF)
	slli	t0, t0, 8
	or	\x, \x, t0
	lbu	t0, \off + 3(BUF)
	slli	t1, t1, 16
	or	\x, \x, t1
	slli	t0, t0, 24
	or	\x, \x, t0
.endm

/*
 * x = W_x >> sh | W_next << (32 - sh) (low 32 bits), loading W_next = word at off(BUF) into
 * next first; t1 = sh, TBL = 32 - sh (see .Lmd5_load_bytes).  4 instructions.
 */
.macro FUNNEL x, next, off
	lw	\next, \off(BUF)
	srlw	\x, \x, t1
	sll	t0, \next, TBL
	or	\x, \x, t0
.endm

	.text

	.globl	md5_implCompress
	.type	md5_implCompress, @function
	.p2align 2
md5_implCompress:
	/* one block: run the MB loop with ofs = limit = 0 (0 + 64 > 0 ends it) */
	li	OFS, 0
	li	LIMIT, 0
	/* fall through */
	.size	md5_implCompress, . - md5_implCompress

	.globl	md5_implCompressMB
	.type	md5_implCompressMB, @function
md5_implCompressMB:			/* no alignment directive: md5_implCompress falls in */
	addi	sp, sp, -96
	sd	s0, 0(sp)
	sd	s1, 8(sp)
	sd	s2, 16(sp)
	sd	s3, 24(sp)
	sd	s4, 32(sp)
	sd	s5, 40(sp)
	sd	s6, 48(sp)
	sd	s7, 56(sp)
	sd	s8, 64(sp)
	sd	s9, 72(sp)
	sd	s10, 80(sp)
	sd	s11, 88(sp)
	lla	TBL, md5_T
	lw	A, 0(STATE)
	lw	B, 4(STATE)
	lw	C, 8(STATE)
	lw	D, 12(STATE)

.Lmd5_block:
	andi	t0, BUF, 3
	bnez	t0, .Lmd5_load_bytes
	lw	X0, 0(BUF)
	lw	X1, 4(BUF)
	lw	X2, 8(BUF)
	lw	X3, 12(BUF)
	lw	X4, 16(BUF)
	lw	X5, 20(BUF)
	lw	X6, 24(BUF)
	lw	X7, 28(BUF)
	lw	X8, 32(BUF)
	lw	X9, 36(BUF)
	lw	X10, 40(BUF)
	lw	X11, 44(BUF)
	lw	X12, 48(BUF)
	lw	X13, 52(BUF)
	lw	X14, 56(BUF)
	lw	X15, 60(BUF)
.Lmd5_rounds:
	/* Round 1 (RFC 1321 §3.4): [abcd k s i], s = 7, 12, 17, 22, k = i */
	FF	A, B, C, D, X0,   7,  0
	FF	D, A, B, C, X1,  12,  1
	FF	C, D, A, B, X2,  17,  2
	FF	B, C, D, A, X3,  22,  3
	FF	A, B, C, D, X4,   7,  4
	FF	D, A, B, C, X5,  12,  5
	FF	C, D, A, B, X6,  17,  6
	FF	B, C, D, A, X7,  22,  7
	FF	A, B, C, D, X8,   7,  8
	FF	D, A, B, C, X9,  12,  9
	FF	C, D, A, B, X10, 17, 10
	FF	B, C, D, A, X11, 22, 11
	FF	A, B, C, D, X12,  7, 12
	FF	D, A, B, C, X13, 12, 13
	FF	C, D, A, B, X14, 17, 14
	FF	B, C, D, A, X15, 22, 15
	/* Round 2: s = 5, 9, 14, 20, k = (1 + 5i) mod 16 */
	GG	A, B, C, D, X1,   5, 16
	GG	D, A, B, C, X6,   9, 17
	GG	C, D, A, B, X11, 14, 18
	GG	B, C, D, A, X0,  20, 19
	GG	A, B, C, D, X5,   5, 20
	GG	D, A, B, C, X10,  9, 21
	GG	C, D, A, B, X15, 14, 22
	GG	B, C, D, A, X4,  20, 23
	GG	A, B, C, D, X9,   5, 24
	GG	D, A, B, C, X14,  9, 25
	GG	C, D, A, B, X3,  14, 26
	GG	B, C, D, A, X8,  20, 27
	GG	A, B, C, D, X13,  5, 28
	GG	D, A, B, C, X2,   9, 29
	GG	C, D, A, B, X7,  14, 30
	GG	B, C, D, A, X12, 20, 31
	/* Round 3: s = 4, 11, 16, 23, k = (5 + 3i) mod 16 */
	HH	A, B, C, D, X5,   4, 32
	HH	D, A, B, C, X8,  11, 33
	HH	C, D, A, B, X11, 16, 34
	HH	B, C, D, A, X14, 23, 35
	HH	A, B, C, D, X1,   4, 36
	HH	D, A, B, C, X4,  11, 37
	HH	C, D, A, B, X7,  16, 38
	HH	B, C, D, A, X10, 23, 39
	HH	A, B, C, D, X13,  4, 40
	HH	D, A, B, C, X0,  11, 41
	HH	C, D, A, B, X3,  16, 42
	HH	B, C, D, A, X6,  23, 43
	HH	A, B, C, D, X9,   4, 44
	HH	D, A, B, C, X12, 11, 45
	HH	C, D, A, B, X15, 16, 46
	HH	B, C, D, A, X2,  23, 47
	/* Round 4: s = 6, 10, 15, 21, k = 7i mod 16 */
	II	A, B, C, D, X0,   6, 48
	II	D, A, B, C, X7,  10, 49
	II	C, D, A, B, X14, 15, 50
	II	B, C, D, A, X5,  21, 51
	II	A, B, C, D, X12,  6, 52
	II	D, A, B, C, X3,  10, 53
	II	C, D, A, B, X10, 15, 54
	II	B, C, D, A, X1,  21, 55
	II	A, B, C, D, X8,   6, 56
	II	D, A, B, C, X15, 10, 57
	II	C, D, A, B, X6,  15, 58
	II	B, C, D, A, X13, 21, 59
	II	A, B, C, D, X4,   6, 60
	II	D, A, B, C, X11, 10, 61
	II	C, D, A, B, X2,  15, 62
	II	B, C, D, A, X9,  21, 63

	/* state += a, b, c, d (mod 2^32); the registers carry the new state to the next block */
	lw	t0, 0(STATE)
	lw	t1, 4(STATE)
	addw	A, A, t0
	addw	B, B, t1
	lw	t0, 8(STATE)
	lw	t1, 12(STATE)
	addw	C, C, t0
	addw	D, D, t1
	sw	A, 0(STATE)
	sw	B, 4(STATE)
	sw	C, 8(STATE)
	sw	D, 12(STATE)

	addi	BUF, BUF, 64
	addiw	OFS, OFS, 64		/* int32 arithmetic, as in Java */
	bge	LIMIT, OFS, .Lmd5_block	/* while (ofs <= limit) */

	mv	a0, OFS
	ld	s0, 0(sp)
	ld	s1, 8(sp)
	ld	s2, 16(sp)
	ld	s3, 24(sp)
	ld	s4, 32(sp)
	ld	s5, 40(sp)
	ld	s6, 48(sp)
	ld	s7, 56(sp)
	ld	s8, 64(sp)
	ld	s9, 72(sp)
	ld	s10, 80(sp)
	ld	s11, 88(sp)
	addi	sp, sp, 96
	ret

	/*
	 * buf not 4-aligned (m = buf & 3 in 1..3, sh = 8m): the aligned words W_j at
	 * buf - m + 4j, j = 1..15, lie inside the block, and X[i] = (W_i >> sh) | (W_{i+1} << (32 - sh))
	 * on the low 32 bits for i = 1..14 (srlw zero-fills the low word; sll's junk above bit 31
	 * is ignored like every upper half here).  X[0] and X[15] straddle words that reach outside
	 * the block, so they come from bytes.  TBL (t2) holds 32 - sh meanwhile and is reloaded.
	 */
.Lmd5_load_bytes:
	LDB	X0, 0
	LDB	X15, 60
	andi	t1, BUF, 3
	slli	t1, t1, 3		/* sh */
	li	TBL, 32
	sub	TBL, TBL, t1		/* 32 - sh */
	andi	BUF, BUF, -4		/* buf - m: W_j at 4j */
	lw	X1, 4(BUF)
	FUNNEL	X1, X2, 8
	FUNNEL	X2, X3, 12
	FUNNEL	X3, X4, 16
	FUNNEL	X4, X5, 20
	FUNNEL	X5, X6, 24
	FUNNEL	X6, X7, 28
	FUNNEL	X7, X8, 32
	FUNNEL	X8, X9, 36
	FUNNEL	X9, X10, 40
	FUNNEL	X10, X11, 44
	FUNNEL	X11, X12, 48
	FUNNEL	X12, X13, 52
	FUNNEL	X13, X14, 56
	lw	t0, 60(BUF)		/* W_15: only X[14] needs it */
	srlw	X14, X14, t1
	sll	t0, t0, TBL
	or	X14, X14, t0
	srli	t0, t1, 3
	add	BUF, BUF, t0		/* buf again */
	lla	TBL, md5_T
	j	.Lmd5_rounds
	.size	md5_implCompressMB, . - md5_implCompressMB

/*
 * md5_T[i] = floor(2^32 * |sin(i + 1)|), the table T[1..64] of RFC 1321 §3.4, except that
 * round 4 (T[49..64]) is stored minus 1: the II step adds ~I as a subtraction (see II).
 */
	.section .rodata
	.p2align 2
	.type	md5_T, @object
md5_T:
	/* round 1, T[1..16] */
	.word	0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee
	.word	0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501
	.word	0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be
	.word	0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821
	/* round 2, T[17..32] */
	.word	0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa
	.word	0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8
	.word	0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed
	.word	0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a
	/* round 3, T[33..48] */
	.word	0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c
	.word	0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70
	.word	0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05
	.word	0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665
	/* round 4, T[49..64] - 1 */
	.word	0xf4292244 - 1, 0x432aff97 - 1, 0xab9423a7 - 1, 0xfc93a039 - 1
	.word	0x655b59c3 - 1, 0x8f0ccc92 - 1, 0xffeff47d - 1, 0x85845dd1 - 1
	.word	0x6fa87e4f - 1, 0xfe2ce6e0 - 1, 0xa3014314 - 1, 0x4e0811a1 - 1
	.word	0xf7537e82 - 1, 0xbd3af235 - 1, 0x2ad7d2bb - 1, 0xeb86d391 - 1
	.size	md5_T, . - md5_T
