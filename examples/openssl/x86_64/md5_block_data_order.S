/*
 * OpenSSL contract (docs/contracts.md), x86_64:
 *
 *   void md5_block_data_order(MD5_CTX *c, const void *p, size_t num);
 *
 * A thin adapter over the repository's HotSpot kernel: MD5_CTX starts with A, B, C, D, which
 * is exactly HotSpot's uint32_t state[4], so the context pointer is the stub's state pointer
 * and nothing past it is touched. num blocks are fed as implCompressMB(p, c, 0, (n-1)*64) in
 * chunks of at most 2^24 blocks (so limit stays a positive int); the stub returns n*64, the
 * bytes to advance p by. num = 0 returns at once.
 *
 * hotspot_md5.inc is kernels/x86_64/md5.S (a symbolic link): its entry points are renamed
 * here so the image defines only the OpenSSL contract.
 */
#define md5_implCompress	ossl_hs_md5_implCompress
#define md5_implCompressMB	ossl_hs_md5_implCompressMB
#include "hotspot_md5.inc"
	.att_syntax prefix		/* the HotSpot kernel is written in Intel syntax */

	.text
	.globl	md5_block_data_order
	.type	md5_block_data_order, @function
	.p2align 4
md5_block_data_order:
	test	%rdx, %rdx
	jz	2f
	push	%rbx			/* three pushes: rsp is 16-aligned at the call */
	push	%r12
	push	%r13
	mov	%rdi, %rbx		/* c */
	mov	%rsi, %r12		/* p */
	mov	%rdx, %r13		/* blocks left */
1:	mov	$(1 << 24), %eax
	cmp	%rax, %r13
	cmovb	%r13, %rax
	sub	%rax, %r13
	lea	-1(%rax), %rcx
	shl	$6, %ecx		/* limit = (n - 1) * 64 */
	mov	%r12, %rdi
	mov	%rbx, %rsi
	xor	%edx, %edx		/* ofs */
	call	ossl_hs_md5_implCompressMB
	movslq	%eax, %rax
	add	%rax, %r12		/* p += n * 64 */
	test	%r13, %r13
	jnz	1b
	pop	%r13
	pop	%r12
	pop	%rbx
2:	ret
	.size	md5_block_data_order, .-md5_block_data_order
