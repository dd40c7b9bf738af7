/*
 * Poly1305 block function for riscv64 (RV64GC), HotSpot intrinsic contract (kernels/README.md):
 *
 *   void poly1305_processBlocks(const uint8_t *input, int64_t length,
 *                               int64_t acc[5], const int64_t r[5]);
 *
 * For each whole 16-byte block m (RFC 8439 §2.5.1): acc = (acc + m + 2^128) * r mod p,
 * p = 2^130 - 5.  A tail under 16 bytes is ignored; length < 16 returns without touching acc.
 * acc and r are five 26-bit limbs in 64-bit words (value = sum limb[i] * 2^(26 i)); in and out,
 * limbs 0-3 < 2^26 and limb 4 < 2^27, and the result is only congruent mod p (not reduced).
 *
 * Method: radix 2^64 inside the loop, h = h0 + h1 2^64 + h2 2^128 with h2 small, and
 * r = R0 + R1 2^64 (r < 2^124).  Because r is clamped (RFC 8439 §2.5: r &=
 * 0x0ffffffc0ffffffc0ffffffc0fffffff), R0, R1 < 2^60 and 4 | R1, so
 *   R1 2^128 = (R1/4) 2^130 == 5 (R1/4) = R1 + (R1 >> 2) =: S1        (mod p)
 * and h * r == d0 + d1 2^64 + d2 2^128 with
 *   d0 = h0 R0 + h1 S1,   d1 = h0 R1 + h1 R0 + h2 S1,   d2 = h2 R0        (10 multiplies).
 * Partial reduction: with d2 = 4q + (d2 & 3), 2^130 q == 5q, so h2 = d2 & 3 and c = 5q =
 * (d2 & ~3) + (d2 >> 2) is added to h0.  That addition is deferred: c is carried to the next
 * block and added together with the message (one carry chain instead of two), and once more
 * after the last block.
 *
 * Bounds (h0, h1 < 2^64; S1 < 1.25 2^60):
 *   on entry h2 = limb4 >> 24 <= 7; before a multiply h2 <= 7 + 1 + 2 = 10 (pad bit, carries of
 *   h1 + m1 + cc where cc <= 2), later blocks h2 <= 3 + 1 + 2 = 6.
 *   d0 < 2^124 + 1.25 2^124, so d0hi < 2.25 2^60; h2 S1 + d0hi < 12.5 2^60 + 2.25 2^60 < 2^64
 *   (added without a carry); d1 < 2^125, so d1hi < 2^61; d2 = h2 R0 + d1hi < 10 2^60 + 2 2^60
 *   = 12 2^60; c = 5 (d2 >> 2) < 15 2^60 < 2^64.
 *   After the final carry h2 <= 3 + 1, so limb 4 = (h1 >> 40) | (h2 << 24) < 5 2^24 < 2^27.
 *
 * Zbb offers nothing here (no carry, multiply or shift-merge instruction), so both riscv64
 * variants share this one code path.
 *
 * Unaligned input: RISC-V Linux allows misaligned ld, but real cores may trap and emulate it
 * slowly.  input advances by 16, so its alignment is fixed for the call: 8-aligned input runs
 * a loop of two ld per block; any other alignment (m = input & 7) loads the 8-aligned words
 * and shifts neighbours together (LOAD_FUNNEL, 6 instructions more per block), with the first
 * 8 - m bytes of the call and the last block's second word assembled from bytes.  Only bytes
 * of whole blocks are read.
 *
 * Registers (psABI: caller-saved a0-a7, t0-t6; unaligned input also s0-s2 in a 32-byte frame):
 *   a0 input  a1 end of the whole blocks  a2 acc  a3 R0  a4 R1  a5 S1
 *   a6 h0  a7 h1  t0 h2  t1 c (pending 5q)  t2-t6 temporaries
 *
 * Cost per 16-byte block (`lab bench`): 43 instructions, 10 of them multiplies; 49 when the
 * input is not 8-aligned.
 */
	.option norelax		/* ld.lld 14 implements no RISC-V relaxation */

#define IN	a0
#define END	a1
#define ACC	a2
#define R0	a3
#define R1	a4
#define S1	a5
#define H0	a6
#define H1	a7
#define H2	t0
#define CP	t1
#define SH	s0	/* unaligned input only (saved in a 32-byte frame) */
#define SHC	s1
#define CARRY	s2

/* m0 = t2, m1 = t3: the block's two little-endian 64-bit words, 8-aligned input */
.macro LOAD_ALIGNED
	ld	t2, 0(IN)
	ld	t3, 8(IN)
.endm

/* x = little-endian 64-bit word at IN + off, any alignment (clobbers t4) */
.macro LDB64 x, off
	lbu	\x, \off(IN)
	.irp	k, 1, 2, 3, 4, 5, 6, 7
	lbu	t4, \off + \k(IN)
	slli	t4, t4, 8 * \k
	or	\x, \x, t4
	.endr
.endm

/*
 * Input not 8-aligned, m = input & 7, SH = 8m, SHC = 64 - SH, IN = input - m (8-aligned), and
 * CARRY = the block's first 8 - m bytes (the top of the previous aligned word):
 *   m0 = CARRY | D1 << SHC,  m1 = D1 >> SH | D2 << SHC,  next CARRY = D2 >> SH
 * with D1, D2 the aligned words at IN + 8 and IN + 16 (D2 reaches into the next block).
 * 8 instructions instead of 2 ld.
 */
.macro LOAD_FUNNEL
	ld	t3, 8(IN)
	ld	t4, 16(IN)
	sll	t2, t3, SHC
	or	t2, t2, CARRY
	srl	t3, t3, SH
	sll	t5, t4, SHC
	or	t3, t3, t5
	srl	CARRY, t4, SH
.endm

/* The last block: D2 would reach past the input, so m1 comes from bytes (IN back to input). */
.macro LOAD_LAST
	ld	t3, 8(IN)
	sll	t2, t3, SHC
	or	t2, t2, CARRY
	srli	t3, SH, 3
	add	IN, IN, t3
	LDB64	t3, 8
.endm

/*
 * One block: h = ((h + c + m + 2^128) * r) partially reduced, leaving the new pending c.
 * \load puts the message words in t2 (m0), t3 (m1).
 */
.macro BLOCK load
	\load
	addi	IN, IN, 16
	/* h += m + c + 2^128 (c < 2^64 is the pending reduction of the previous block) */
	add	H0, H0, t2
	sltu	t2, H0, t2		/* carry 1 */
	add	H0, H0, CP
	sltu	t4, H0, CP		/* carry 2 */
	add	t2, t2, t4		/* cc = carries into h1, <= 2 */
	add	H1, H1, t3
	sltu	t3, H1, t3
	add	H1, H1, t2
	sltu	t2, H1, t2
	add	H2, H2, t3
	add	H2, H2, t2
	addi	H2, H2, 1		/* the 2^128 pad bit of a full block (RFC 8439 §2.5.1) */
	/* d0 = h0 R0 + h1 S1 -> t2:H0 ; the h0 products first, so H0 can take d0lo */
	mulhu	t2, H0, R0
	mul	t3, H0, R1
	mulhu	t4, H0, R1
	mul	H0, H0, R0
	mul	t5, H1, S1
	mulhu	t6, H1, S1
	add	H0, H0, t5
	sltu	t5, H0, t5
	add	t2, t2, t6
	add	t2, t2, t5
	/* g = h2 S1 + d0hi, no carry possible (bounds above) */
	mul	t5, H2, S1
	add	t2, t2, t5
	/* d1 = h0 R1 + h1 R0 + g -> t4:H1 */
	mulhu	t6, H1, R0
	mul	H1, H1, R0
	add	H1, H1, t3
	sltu	t3, H1, t3
	add	t4, t4, t6
	add	t4, t4, t3
	add	H1, H1, t2
	sltu	t2, H1, t2
	add	t4, t4, t2
	/* d2 = h2 R0 + d1hi */
	mul	t2, H2, R0
	add	t2, t2, t4
	/* h2 = d2 & 3, c = 5 (d2 >> 2) = (d2 & ~3) + (d2 >> 2), since 2^130 == 5 (mod p) */
	andi	H2, t2, 3
	andi	CP, t2, -4
	srli	t2, t2, 2
	add	CP, CP, t2
.endm

#ifdef __riscv_vector
/* Shortest length (bytes) that may take the RVV path (poly1305-rvv.inc: its header has the
 * measured crossover, which also depends on VLEN); shorter ones run the scalar loop. */
#define POLY_RVV_MIN 256
#endif

	.text
	.globl	poly1305_processBlocks
	.type	poly1305_processBlocks, @function
	.p2align 2
poly1305_processBlocks:
#ifdef __riscv_vector
	li	t2, POLY_RVV_MIN
	bge	a1, t2, .Lpoly_rvv	/* signed: a negative length stays scalar */
.Lpoly_scalar:
#endif
	li	t2, 16
	blt	a1, t2, .Lpoly_return	/* length < 16 (signed): acc untouched */
	andi	a1, a1, -16
	add	END, IN, a1		/* end of the last whole block */

	/* r: 26-bit limbs -> R0 = r mod 2^64, R1 = r >> 64 (r < 2^124; limb 2 straddles) */
	ld	t2, 0(a3)
	ld	t3, 8(a3)
	ld	t4, 16(a3)
	ld	t5, 24(a3)
	ld	t6, 32(a3)
	slli	t3, t3, 26
	slli	R0, t4, 52
	or	R0, R0, t2
	or	R0, R0, t3		/* R0 = r0 | r1 << 26 | r2 << 52 (a3 consumed) */
	srli	t4, t4, 12
	slli	t5, t5, 14
	slli	t6, t6, 40
	or	R1, t4, t5
	or	R1, R1, t6		/* R1 = r2 >> 12 | r3 << 14 | r4 << 40 */
	srli	S1, R1, 2
	add	S1, S1, R1		/* S1 = 5 (R1 / 4) */

	/* acc: 26-bit limbs -> h0, h1, h2 (limbs within bounds do not overlap: or == add) */
	ld	t2, 0(ACC)
	ld	t3, 8(ACC)
	ld	t4, 16(ACC)
	ld	t5, 24(ACC)
	ld	t6, 32(ACC)
	slli	t3, t3, 26
	slli	H0, t4, 52
	or	H0, H0, t2
	or	H0, H0, t3		/* h0 = a0 | a1 << 26 | a2 << 52 */
	srli	t4, t4, 12
	slli	t5, t5, 14
	slli	H1, t6, 40
	or	H1, H1, t4
	or	H1, H1, t5		/* h1 = a2 >> 12 | a3 << 14 | a4 << 40 */
	srli	H2, t6, 24		/* h2 = a4 >> 24 <= 7 */
	li	CP, 0

	andi	t2, IN, 7
	bnez	t2, .Lpoly_unaligned
.Lpoly_loop_aligned:
	BLOCK	LOAD_ALIGNED
	bne	IN, END, .Lpoly_loop_aligned
	j	.Lpoly_store
	/* input not 8-aligned: shift aligned words together (header, "Unaligned input") */
.Lpoly_unaligned:
	addi	sp, sp, -32
	sd	s0, 0(sp)
	sd	s1, 8(sp)
	sd	s2, 16(sp)
	slli	SH, t2, 3		/* t2 = m = input & 7 from the test above */
	li	SHC, 64
	sub	SHC, SHC, SH
	LDB64	CARRY, 0
	sll	CARRY, CARRY, SH
	srl	CARRY, CARRY, SH	/* the block's first 8 - m bytes */
	sub	IN, IN, t2		/* input - m: 8-aligned */
	sub	END, END, t2
	addi	END, END, -16		/* (input - m) of the last block */
	beq	IN, END, .Lpoly_last
.Lpoly_loop_funnel:
	BLOCK	LOAD_FUNNEL
	bne	IN, END, .Lpoly_loop_funnel
.Lpoly_last:
	BLOCK	LOAD_LAST
	ld	s0, 0(sp)
	ld	s1, 8(sp)
	ld	s2, 16(sp)
	addi	sp, sp, 32

.Lpoly_store:
	/* add the last pending c; h2 <= 3 + 1 afterwards */
	add	H0, H0, CP
	sltu	t2, H0, CP
	add	H1, H1, t2
	sltu	t2, H1, t2
	add	H2, H2, t2
	/* back to 26-bit limbs: limbs 0-3 < 2^26, limb 4 < 2^27 (see bounds) */
	lui	t6, 0x4000
	addi	t6, t6, -1		/* 2^26 - 1 */
	and	t2, H0, t6
	sd	t2, 0(ACC)
	srli	t2, H0, 26
	and	t2, t2, t6
	sd	t2, 8(ACC)
	srli	t2, H0, 52
	slli	t3, H1, 12
	or	t2, t2, t3
	and	t2, t2, t6
	sd	t2, 16(ACC)
	srli	t2, H1, 14
	and	t2, t2, t6
	sd	t2, 24(ACC)
	srli	t2, H1, 40
	slli	t3, H2, 24
	or	t2, t2, t3
	sd	t2, 32(ACC)
.Lpoly_return:
	ret

#ifdef __riscv_vector
#include "poly1305-rvv.inc"
#endif
	.size	poly1305_processBlocks, . - poly1305_processBlocks
