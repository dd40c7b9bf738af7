/*
 * OpenSSL contract (docs/contracts.md), x86_64 baseline (no BMI2, no ADX, no AVX):
 *
 *   void poly1305_blocks(void *ctx, const unsigned char *inp, size_t len, unsigned int padbit);
 *
 * ctx is OpenSSL's scalar base 2^64 context on x86_64 (crypto/poly1305/asm/poly1305-x86_64.pl):
 *   h0 at 0, h1 at 8, h2 at 16 (h = h0 + h1*2^64 + h2*2^128, partially reduced), r0 at 24,
 *   r1 at 32 (clamped key, written by poly1305_init). Only h is written.
 * For each whole 16-byte block m of len: h = (h + m + padbit*2^128) * r mod 2^130-5; a tail
 * under 16 bytes is ignored, len < 16 returns without touching ctx.
 *
 * The product, with s1 = r1 + (r1 >> 2) = 5*r1/4 (the clamp makes r1 = 0 mod 4, 2^130 = 5):
 *   d0 = h0*r0 + h1*s1,  d1 = h0*r1 + h1*r0 + h2*s1 + hi(d0),  d2 = h2*r0 + hi(d1)
 * then the partial reduction h2 = d2 & 3, h0 += 5*(d2 >> 2) carried up: h < 2^130 + 2^67,
 * below 2p, so OpenSSL's poly1305_emit reduces it exactly.
 *
 * padbit is an unsigned int: the psABI leaves bits 32-63 of rcx unspecified, so only ecx is
 * read (the line marked PADBIT).
 *
 * Registers: rdi ctx, rsi inp, r15 blocks left, rbp padbit, r8-r10 h, r11 r0, r12 r1, r13 s1,
 * rbx/rcx/r14 column sums, rax/rdx mul. rbx, rbp, r12-r15 are callee-saved: pushed here.
 */
	.text
	.globl	poly1305_blocks
	.type	poly1305_blocks, @function
	.p2align 4
poly1305_blocks:
	shr	$4, %rdx
	jz	2f
	push	%rbx
	push	%rbp
	push	%r12
	push	%r13
	push	%r14
	push	%r15
	mov	%rdx, %r15
	mov	%ecx, %ebp			/* PADBIT */
	mov	0(%rdi), %r8
	mov	8(%rdi), %r9
	mov	16(%rdi), %r10
	mov	24(%rdi), %r11
	mov	32(%rdi), %r12
	mov	%r12, %r13
	shr	$2, %r13
	add	%r12, %r13			/* s1 */
1:	add	0(%rsi), %r8			/* h += m + padbit * 2^128 */
	adc	8(%rsi), %r9
	adc	%rbp, %r10
	lea	16(%rsi), %rsi
	mov	%r8, %rax			/* d0 = h0*r0 + h1*s1: rbx, r14 */
	mul	%r11
	mov	%rax, %rbx
	mov	%rdx, %r14
	mov	%r9, %rax
	mul	%r13
	add	%rax, %rbx
	adc	%rdx, %r14
	mov	%r8, %rax			/* d1 = h0*r1 + hi(d0) + h1*r0 + h2*s1: rcx, r14 */
	mul	%r12
	add	%r14, %rax
	adc	$0, %rdx
	mov	%rax, %rcx
	mov	%rdx, %r14
	mov	%r9, %rax
	mul	%r11
	add	%rax, %rcx
	adc	%rdx, %r14
	mov	%r10, %rax
	imul	%r13, %rax
	add	%rax, %rcx
	adc	$0, %r14
	mov	%r10, %rax			/* d2 = h2*r0 + hi(d1) */
	imul	%r11, %rax
	add	%r14, %rax
	mov	%rbx, %r8
	mov	%rcx, %r9
	mov	%rax, %r10
	and	$3, %r10
	mov	%rax, %rdx
	shr	$2, %rdx
	and	$-4, %rax
	add	%rdx, %rax			/* 5 * (d2 >> 2) */
	add	%rax, %r8
	adc	$0, %r9
	adc	$0, %r10
	dec	%r15
	jnz	1b
	mov	%r8, 0(%rdi)
	mov	%r9, 8(%rdi)
	mov	%r10, 16(%rdi)
	pop	%r15
	pop	%r14
	pop	%r13
	pop	%r12
	pop	%rbp
	pop	%rbx
2:	ret
	.size	poly1305_blocks, .-poly1305_blocks
