/*
 * OpenSSL contract (docs/contracts.md), riscv64 (RV64GC; the Zbb build is the same code):
 *
 *   void poly1305_blocks(void *ctx, const unsigned char *inp, size_t len, unsigned int padbit);
 *
 * ctx is OpenSSL's scalar base 2^64 context on riscv64 (crypto/poly1305/asm/poly1305-riscv64.pl):
 *   h0 at 0, h1 at 8, h2 at 16, r0 at 24, r1 at 32, s1 = r1 + (r1 >> 2) at 40 (all written by
 *   poly1305_init), top_power (u32) at 48 for the vector code. Only h is written.
 * For each whole 16-byte block m of len: h = (h + m + padbit*2^128) * r mod 2^130-5; a tail
 * under 16 bytes is ignored, len < 16 returns without touching ctx.
 *
 *   d0 = h0*r0 + h1*s1,  d1 = h0*r1 + h1*r0 + h2*s1 + hi(d0),  d2 = h2*r0 + hi(d1)
 * then h2 = d2 & 3, h0 += 5*(d2 >> 2) carried up (h < 2p).
 *
 * padbit is an unsigned int, passed sign-extended (RISC-V psABI): it is zero-extended (the
 * lines marked PADBIT). inp may be misaligned: ld is allowed to be (RISC-V Linux); each block
 * reads exactly its 16 bytes. Leaf: only a0-a7 and t0-t6 are used.
 */
	.option norelax
	.text
	.globl	poly1305_blocks
	.type	poly1305_blocks, @function
	.p2align 2
poly1305_blocks:
	srli	a2, a2, 4
	beqz	a2, 2f
	slli	a3, a3, 32		/* PADBIT */
	srli	a3, a3, 32		/* PADBIT */
	ld	a4, 0(a0)		/* h0 */
	ld	a5, 8(a0)		/* h1 */
	ld	a6, 16(a0)		/* h2 */
	ld	a7, 24(a0)		/* r0 */
	ld	t0, 32(a0)		/* r1 */
	ld	t1, 40(a0)		/* s1 */
1:	ld	t2, 0(a1)
	ld	t4, 8(a1)
	addi	a1, a1, 16
	add	a4, a4, t2		/* h += m + padbit * 2^128 */
	sltu	t3, a4, t2
	add	a5, a5, t3
	sltu	t5, a5, t3
	add	a5, a5, t4
	sltu	t6, a5, t4
	add	a6, a6, t5
	add	a6, a6, t6
	add	a6, a6, a3
	mul	t2, a4, a7		/* d0 = h0*r0 + h1*s1: t2, t3 */
	mulhu	t3, a4, a7
	mul	t4, a5, t1
	mulhu	t5, a5, t1
	add	t2, t2, t4
	sltu	t6, t2, t4
	add	t3, t3, t5
	add	t3, t3, t6
	mul	t4, a4, t0		/* d1 = h0*r1 + hi(d0) + h1*r0 + h2*s1: t4, t5 */
	mulhu	t5, a4, t0
	add	t4, t4, t3
	sltu	t6, t4, t3
	add	t5, t5, t6
	mv	a4, t2			/* h0 = lo(d0) */
	mul	t2, a5, a7
	mulhu	t3, a5, a7
	add	t4, t4, t2
	sltu	t6, t4, t2
	add	t5, t5, t3
	add	t5, t5, t6
	mul	t2, a6, t1
	add	t4, t4, t2
	sltu	t6, t4, t2
	add	t5, t5, t6
	mul	t2, a6, a7		/* d2 = h2*r0 + hi(d1) */
	add	t2, t2, t5
	mv	a5, t4			/* h1 = lo(d1) */
	andi	a6, t2, 3
	andi	t3, t2, -4
	srli	t5, t2, 2
	add	t3, t3, t5		/* 5 * (d2 >> 2) */
	add	a4, a4, t3
	sltu	t6, a4, t3
	add	a5, a5, t6
	sltu	t6, a5, t6
	add	a6, a6, t6
	addi	a2, a2, -1
	bnez	a2, 1b
	sd	a4, 0(a0)
	sd	a5, 8(a0)
	sd	a6, 16(a0)
2:	ret
	.size	poly1305_blocks, .-poly1305_blocks
