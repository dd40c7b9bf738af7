// OpenSSL contract (docs/contracts.md), aarch64:
//
//   void md5_block_data_order(MD5_CTX *c, const void *p, size_t num);
//
// A thin adapter over the repository's HotSpot kernel: MD5_CTX starts with A, B, C, D, which
// is exactly HotSpot's uint32_t state[4], so the context pointer is the stub's state pointer
// and nothing past it is touched. num blocks are fed as implCompressMB(p, c, 0, (n-1)*64) in
// chunks of at most 2^24 blocks (so limit stays a positive int); the stub returns n*64, the
// bytes to advance p by. num = 0 returns at once.
//
// hotspot_md5.inc is kernels/aarch64/md5.S (a symbolic link): its entry points are renamed
// here so the image defines only the OpenSSL contract.
#define md5_implCompress	ossl_hs_md5_implCompress
#define md5_implCompressMB	ossl_hs_md5_implCompressMB
#include "hotspot_md5.inc"

	.text
	.globl	md5_block_data_order
	.type	md5_block_data_order, %function
	.p2align 2
md5_block_data_order:
	cbz	x2, 2f
	stp	x29, x30, [sp, #-48]!
	mov	x29, sp
	stp	x19, x20, [sp, #16]
	str	x21, [sp, #32]
	mov	x19, x0			// c
	mov	x20, x1			// p
	mov	x21, x2			// blocks left
1:	mov	x9, #(1 << 24)
	cmp	x21, x9
	csel	x9, x21, x9, lo
	sub	x21, x21, x9
	sub	x9, x9, #1
	lsl	x3, x9, #6		// limit = (n - 1) * 64
	mov	x0, x20
	mov	x1, x19
	mov	x2, #0			// ofs
	bl	ossl_hs_md5_implCompressMB
	add	x20, x20, w0, sxtw	// p += n * 64
	cbnz	x21, 1b
	ldr	x21, [sp, #32]
	ldp	x19, x20, [sp, #16]
	ldp	x29, x30, [sp], #48
2:	ret
	.size	md5_block_data_order, .-md5_block_data_order
