// OpenSSL contract (docs/contracts.md), aarch64 (ARMv8.0-A base):
//
//   void poly1305_blocks(void *ctx, const unsigned char *inp, size_t len, unsigned int padbit);
//
// ctx is OpenSSL's scalar base 2^64 context on armv8 (crypto/poly1305/asm/poly1305-armv8.pl):
//   h0 at 0, h1 at 8, h2 at 16, is_base2_26 at 24 (0: h is base 2^64; never read here),
//   r0 at 32, r1 at 40 (clamped key from poly1305_init). Only h is written.
// For each whole 16-byte block m of len: h = (h + m + padbit*2^128) * r mod 2^130-5; a tail
// under 16 bytes is ignored, len < 16 returns without touching ctx.
//
// With s1 = r1 + (r1 >> 2) = 5*r1/4:
//   d0 = h0*r0 + h1*s1,  d1 = h0*r1 + h1*r0 + h2*s1 + hi(d0),  d2 = h2*r0 + hi(d1)
// then h2 = d2 & 3, h0 += 5*(d2 >> 2) carried up (h < 2p: poly1305_emit reduces exactly).
//
// padbit is an unsigned int: AAPCS64 leaves bits 32-63 of x3 unspecified, so w3 is
// zero-extended first (the line marked PADBIT). Leaf: only x0-x17 are used.
	.text
	.globl	poly1305_blocks
	.type	poly1305_blocks, %function
	.p2align 2
poly1305_blocks:
	lsr	x2, x2, #4
	cbz	x2, 2f
	mov	w3, w3				// PADBIT
	ldp	x4, x5, [x0]			// h0, h1
	ldr	x6, [x0, #16]			// h2
	ldp	x7, x8, [x0, #32]		// r0, r1
	add	x9, x8, x8, lsr #2		// s1
1:	ldp	x10, x11, [x1], #16
	adds	x4, x4, x10			// h += m + padbit * 2^128
	adcs	x5, x5, x11
	adc	x6, x6, x3
	mul	x12, x4, x7			// d0 = h0*r0 + h1*s1: x12, x13
	umulh	x13, x4, x7
	mul	x10, x5, x9
	umulh	x11, x5, x9
	adds	x12, x12, x10
	adc	x13, x13, x11
	mul	x14, x4, x8			// d1 = h0*r1 + hi(d0) + h1*r0 + h2*s1: x14, x15
	umulh	x15, x4, x8
	adds	x14, x14, x13
	adc	x15, x15, xzr
	mul	x10, x5, x7
	umulh	x11, x5, x7
	adds	x14, x14, x10
	adc	x15, x15, x11
	mul	x10, x6, x9
	adds	x14, x14, x10
	adc	x15, x15, xzr
	madd	x16, x6, x7, x15		// d2 = h2*r0 + hi(d1)
	and	x6, x16, #3
	and	x10, x16, #-4
	add	x10, x10, x16, lsr #2		// 5 * (d2 >> 2)
	adds	x4, x12, x10
	adcs	x5, x14, xzr
	adc	x6, x6, xzr
	subs	x2, x2, #1
	b.ne	1b
	stp	x4, x5, [x0]
	str	x6, [x0, #16]
2:	ret
	.size	poly1305_blocks, .-poly1305_blocks
