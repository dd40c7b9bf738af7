/*
 * OpenSSL contract (docs/contracts.md), riscv64:
 *
 *   void md5_block_data_order(MD5_CTX *c, const void *p, size_t num);
 *
 * A thin adapter over the repository's HotSpot kernel: MD5_CTX starts with A, B, C, D, which
 * is exactly HotSpot's uint32_t state[4], so the context pointer is the stub's state pointer
 * and nothing past it is touched. num blocks are fed as implCompressMB(p, c, 0, (n-1)*64) in
 * chunks of at most 2^24 blocks (so limit stays a positive int); the stub returns n*64, the
 * bytes to advance p by. num = 0 returns at once (OpenSSL's md5_block_data_order does too).
 *
 * hotspot_md5.inc is kernels/riscv64/md5.S (a symbolic link): its entry points are renamed
 * here so the image defines only the OpenSSL contract.
 */
#define md5_implCompress	ossl_hs_md5_implCompress
#define md5_implCompressMB	ossl_hs_md5_implCompressMB
#include "hotspot_md5.inc"

	.option norelax
	.text
	.globl	md5_block_data_order
	.type	md5_block_data_order, @function
	.p2align 2
md5_block_data_order:
	beqz	a2, 2f
	addi	sp, sp, -32
	sd	ra, 0(sp)
	sd	s0, 8(sp)
	sd	s1, 16(sp)
	sd	s2, 24(sp)
	mv	s0, a0			/* c */
	mv	s1, a1			/* p */
	mv	s2, a2			/* blocks left */
1:	li	t0, 1 << 24
	mv	t1, s2
	bleu	t1, t0, 3f
	mv	t1, t0
3:	sub	s2, s2, t1
	addi	t1, t1, -1
	slli	a3, t1, 6		/* limit = (n - 1) * 64 */
	mv	a0, s1
	mv	a1, s0
	li	a2, 0			/* ofs */
	call	ossl_hs_md5_implCompressMB
	add	s1, s1, a0		/* p += n * 64 */
	bnez	s2, 1b
	ld	ra, 0(sp)
	ld	s0, 8(sp)
	ld	s1, 16(sp)
	ld	s2, 24(sp)
	addi	sp, sp, 32
2:	ret
	.size	md5_block_data_order, .-md5_block_data_order
