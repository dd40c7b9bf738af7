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
 *   ra       T[i] of the next step (saved in the frame: the PRE, see PRE_F)
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
 * Predicted cycles per block on sifive-u74 (llvm-mca-19, `lab bench --cpu sifive-u74`): 446 and
 * 357 with the PRE interleaved, 508 and 428 with each step in plain order; what remains is the
 * dependency chain through b (and, xor, add, rotate, add in round 1).
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

/*
 * Rotates: roriw with Zbb; without, slliw into t0, srliw, or (written out in each step).
 *
 * Software pipelining for in-order dual issue (SiFive U74: `lab bench --cpu sifive-u74`).
 * Each step splits in two parts:
 *   PRE   what does not depend on b, the value the previous step has just produced:
 *         a += X[k] + T[i] (T through ra), and the part of f(b,c,d) that needs only c and d;
 *   chain what does: the rest of f, a += f, the rotate, a += b.
 * A step's chain is interleaved with the PRE of the next step (PRE_F/G/H/I, given by name with
 * the next step's a, c, d, X[k] and i), so an in-order core can pair every chain instruction
 * with an independent one.  The next step's a is this step's d, so its PRE adds into d only
 * after this chain's last read of d; it writes t1 only after this chain has consumed t1.
 * Instruction counts are those of the plain order: 11 per step (9/8 with Zbb) as noted below.
 */
.macro PRE_F part, a, c, d, x, i
	.if \part == 1
	lw	ra, 4 * \i(TBL)
	.elseif \part == 2
	add	\a, \a, \x
	.elseif \part == 3
	add	\a, \a, ra
	.elseif \part == 4
	xor	t1, \c, \d
	.endif
.endm

/* Round 2's PRE: with Zbb also andn(c, d), the half of G that does not need b (see GG). */
.macro PRE_G part, a, c, d, x, i
	.if \part <= 3
	PRE_F	\part, \a, \c, \d, \x, \i
#if defined(__riscv_zbb)
	.elseif \part == 4
	andn	t1, \c, \d
	.elseif \part == 5
	add	\a, \a, t1
#endif
	.endif
.endm

.macro PRE_H part, a, c, d, x, i
	PRE_F	\part, \a, \c, \d, \x, \i
.endm

/* Round 4's PRE: without Zbb also c ^ d (see II). */
.macro PRE_I part, a, c, d, x, i
	.if \part <= 3
	PRE_F	\part, \a, \c, \d, \x, \i
#if !defined(__riscv_zbb)
	.elseif \part == 4
	xor	t1, \c, \d
#endif
	.endif
.endm

/* The last step of a block: the next block's words are not loaded yet. */
.macro PRE_NONE part, a, c, d, x, i
.endm

/* A step's PRE on its own, for the first step of a block. */
.macro PRE pre, a, c, d, x, i
	\pre	1, \a, \c, \d, \x, \i
	\pre	2, \a, \c, \d, \x, \i
	\pre	3, \a, \c, \d, \x, \i
	\pre	4, \a, \c, \d, \x, \i
	\pre	5, \a, \c, \d, \x, \i
.endm

/*
 * Round 1: F(b,c,d) = (b & c) | (~b & d) = d ^ (b & (c ^ d)); c ^ d comes from the PRE.
 * 11 instructions with the PRE (9 with Zbb).
 */
.macro FF a, b, c, d, s, pre, na, nc, nd, nx, ni
	and	t1, t1, \b
	\pre	1, \na, \nc, \nd, \nx, \ni
	xor	t1, t1, \d
	\pre	2, \na, \nc, \nd, \nx, \ni
	add	\a, \a, t1
	\pre	3, \na, \nc, \nd, \nx, \ni
#if defined(__riscv_zbb)
	roriw	\a, \a, 32 - \s
	\pre	4, \na, \nc, \nd, \nx, \ni
#else
	slliw	t0, \a, \s
	srliw	\a, \a, 32 - \s
	\pre	4, \na, \nc, \nd, \nx, \ni
	or	\a, \a, t0
#endif
	add	\a, \a, \b
	\pre	5, \na, \nc, \nd, \nx, \ni
.endm

/*
 * Round 2: G(b,c,d) = (b & d) | (c & ~d).
 * Base: c ^ (d & (b ^ c)), 11 instructions with the PRE.  Zbb: the two terms are disjoint, so
 * G = (b & d) + andn(c, d), and the PRE adds andn(c, d): 9 instructions.
 */
.macro GG a, b, c, d, s, pre, na, nc, nd, nx, ni
#if defined(__riscv_zbb)
	and	t1, \b, \d
	\pre	1, \na, \nc, \nd, \nx, \ni
	add	\a, \a, t1
	\pre	2, \na, \nc, \nd, \nx, \ni
	roriw	\a, \a, 32 - \s
	\pre	3, \na, \nc, \nd, \nx, \ni
	add	\a, \a, \b
	\pre	4, \na, \nc, \nd, \nx, \ni
	\pre	5, \na, \nc, \nd, \nx, \ni
#else
	xor	t1, \b, \c
	\pre	1, \na, \nc, \nd, \nx, \ni
	and	t1, t1, \d
	\pre	2, \na, \nc, \nd, \nx, \ni
	xor	t1, t1, \c
	\pre	3, \na, \nc, \nd, \nx, \ni
	add	\a, \a, t1
	slliw	t0, \a, \s
	\pre	4, \na, \nc, \nd, \nx, \ni
	srliw	\a, \a, 32 - \s
	\pre	5, \na, \nc, \nd, \nx, \ni
	or	\a, \a, t0
	add	\a, \a, \b
#endif
.endm

/* Round 3: H(b,c,d) = b ^ c ^ d; c ^ d comes from the PRE.  10 instructions (8 with Zbb). */
.macro HH a, b, c, d, s, pre, na, nc, nd, nx, ni
	xor	t1, t1, \b
	\pre	1, \na, \nc, \nd, \nx, \ni
	add	\a, \a, t1
	\pre	2, \na, \nc, \nd, \nx, \ni
#if defined(__riscv_zbb)
	roriw	\a, \a, 32 - \s
	\pre	3, \na, \nc, \nd, \nx, \ni
#else
	slliw	t0, \a, \s
	\pre	3, \na, \nc, \nd, \nx, \ni
	srliw	\a, \a, 32 - \s
	\pre	4, \na, \nc, \nd, \nx, \ni
	or	\a, \a, t0
#endif
	add	\a, \a, \b
#if defined(__riscv_zbb)
	\pre	4, \na, \nc, \nd, \nx, \ni
#endif
	\pre	5, \na, \nc, \nd, \nx, \ni
.endm

/*
 * Round 4: I(b,c,d) = c ^ (b | ~d) = ~(c ^ (d & ~b))   (De Morgan: b | ~d = ~(~b & d)).
 * With ~Z = -Z - 1: a + I = a - (c ^ (d & ~b)) - 1, and the "- 1" is folded into the
 * round-4 constants of md5_T.  d & ~b is andn(d, b) with Zbb; without, c ^ (d & ~b) =
 * (c ^ d) ^ (b & d) with c ^ d from the PRE.  11 instructions (8 with Zbb) instead of 12 for
 * the literal not/or/xor/add form.
 */
.macro II a, b, c, d, s, pre, na, nc, nd, nx, ni
#if defined(__riscv_zbb)
	andn	t1, \d, \b
	\pre	1, \na, \nc, \nd, \nx, \ni
	xor	t1, t1, \c
	\pre	2, \na, \nc, \nd, \nx, \ni
	sub	\a, \a, t1
	\pre	3, \na, \nc, \nd, \nx, \ni
	roriw	\a, \a, 32 - \s
	\pre	4, \na, \nc, \nd, \nx, \ni
#else
	and	t0, \b, \d
	\pre	1, \na, \nc, \nd, \nx, \ni
	xor	t1, t1, t0
	\pre	2, \na, \nc, \nd, \nx, \ni
	sub	\a, \a, t1
	\pre	3, \na, \nc, \nd, \nx, \ni
	slliw	t0, \a, \s
	srliw	\a, \a, 32 - \s
	\pre	4, \na, \nc, \nd, \nx, \ni
	or	\a, \a, t0
#endif
	add	\a, \a, \b
	\pre	5, \na, \nc, \nd, \nx, \ni
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
	addi	sp, sp, -112
	sd	ra, 96(sp)		/* ra: the PRE's T[i] */
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
	PRE	PRE_F, A, C, D, X0, 0	/* the first step's PRE */
	/* Round 1 (RFC 1321 §3.4): [abcd k s i], s = 7, 12, 17, 22, k = i; each line also names
	 * the next step (PRE, its a, c, d, X[k], i) whose independent part it interleaves */
	FF	A, B, C, D,  7, PRE_F, D, B, C, X1, 1
	FF	D, A, B, C, 12, PRE_F, C, A, B, X2, 2
	FF	C, D, A, B, 17, PRE_F, B, D, A, X3, 3
	FF	B, C, D, A, 22, PRE_F, A, C, D, X4, 4
	FF	A, B, C, D,  7, PRE_F, D, B, C, X5, 5
	FF	D, A, B, C, 12, PRE_F, C, A, B, X6, 6
	FF	C, D, A, B, 17, PRE_F, B, D, A, X7, 7
	FF	B, C, D, A, 22, PRE_F, A, C, D, X8, 8
	FF	A, B, C, D,  7, PRE_F, D, B, C, X9, 9
	FF	D, A, B, C, 12, PRE_F, C, A, B, X10, 10
	FF	C, D, A, B, 17, PRE_F, B, D, A, X11, 11
	FF	B, C, D, A, 22, PRE_F, A, C, D, X12, 12
	FF	A, B, C, D,  7, PRE_F, D, B, C, X13, 13
	FF	D, A, B, C, 12, PRE_F, C, A, B, X14, 14
	FF	C, D, A, B, 17, PRE_F, B, D, A, X15, 15
	FF	B, C, D, A, 22, PRE_G, A, C, D, X1, 16
	/* Round 2: s = 5, 9, 14, 20, k = (1 + 5i) mod 16 */
	GG	A, B, C, D,  5, PRE_G, D, B, C, X6, 17
	GG	D, A, B, C,  9, PRE_G, C, A, B, X11, 18
	GG	C, D, A, B, 14, PRE_G, B, D, A, X0, 19
	GG	B, C, D, A, 20, PRE_G, A, C, D, X5, 20
	GG	A, B, C, D,  5, PRE_G, D, B, C, X10, 21
	GG	D, A, B, C,  9, PRE_G, C, A, B, X15, 22
	GG	C, D, A, B, 14, PRE_G, B, D, A, X4, 23
	GG	B, C, D, A, 20, PRE_G, A, C, D, X9, 24
	GG	A, B, C, D,  5, PRE_G, D, B, C, X14, 25
	GG	D, A, B, C,  9, PRE_G, C, A, B, X3, 26
	GG	C, D, A, B, 14, PRE_G, B, D, A, X8, 27
	GG	B, C, D, A, 20, PRE_G, A, C, D, X13, 28
	GG	A, B, C, D,  5, PRE_G, D, B, C, X2, 29
	GG	D, A, B, C,  9, PRE_G, C, A, B, X7, 30
	GG	C, D, A, B, 14, PRE_G, B, D, A, X12, 31
	GG	B, C, D, A, 20, PRE_H, A, C, D, X5, 32
	/* Round 3: s = 4, 11, 16, 23, k = (5 + 3i) mod 16 */
	HH	A, B, C, D,  4, PRE_H, D, B, C, X8, 33
	HH	D, A, B, C, 11, PRE_H, C, A, B, X11, 34
	HH	C, D, A, B, 16, PRE_H, B, D, A, X14, 35
	HH	B, C, D, A, 23, PRE_H, A, C, D, X1, 36
	HH	A, B, C, D,  4, PRE_H, D, B, C, X4, 37
	HH	D, A, B, C, 11, PRE_H, C, A, B, X7, 38
	HH	C, D, A, B, 16, PRE_H, B, D, A, X10, 39
	HH	B, C, D, A, 23, PRE_H, A, C, D, X13, 40
	HH	A, B, C, D,  4, PRE_H, D, B, C, X0, 41
	HH	D, A, B, C, 11, PRE_H, C, A, B, X3, 42
	HH	C, D, A, B, 16, PRE_H, B, D, A, X6, 43
	HH	B, C, D, A, 23, PRE_H, A, C, D, X9, 44
	HH	A, B, C, D,  4, PRE_H, D, B, C, X12, 45
	HH	D, A, B, C, 11, PRE_H, C, A, B, X15, 46
	HH	C, D, A, B, 16, PRE_H, B, D, A, X2, 47
	HH	B, C, D, A, 23, PRE_I, A, C, D, X0, 48
	/* Round 4: s = 6, 10, 15, 21, k = 7i mod 16 */
	II	A, B, C, D,  6, PRE_I, D, B, C, X7, 49
	II	D, A, B, C, 10, PRE_I, C, A, B, X14, 50
	II	C, D, A, B, 15, PRE_I, B, D, A, X5, 51
	II	B, C, D, A, 21, PRE_I, A, C, D, X12, 52
	II	A, B, C, D,  6, PRE_I, D, B, C, X3, 53
	II	D, A, B, C, 10, PRE_I, C, A, B, X10, 54
	II	C, D, A, B, 15, PRE_I, B, D, A, X1, 55
	II	B, C, D, A, 21, PRE_I, A, C, D, X8, 56
	II	A, B, C, D,  6, PRE_I, D, B, C, X15, 57
	II	D, A, B, C, 10, PRE_I, C, A, B, X6, 58
	II	C, D, A, B, 15, PRE_I, B, D, A, X13, 59
	II	B, C, D, A, 21, PRE_I, A, C, D, X4, 60
	II	A, B, C, D,  6, PRE_I, D, B, C, X11, 61
	II	D, A, B, C, 10, PRE_I, C, A, B, X2, 62
	II	C, D, A, B, 15, PRE_I, B, D, A, X9, 63
	II	B, C, D, A, 21, PRE_NONE, A, C, D, X0, 0

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
	ld	ra, 96(sp)
	addi	sp, sp, 112
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
