/*
 * uint64_t lab_spin(uint64_t iterations)  -- AArch64 (AAPCS64: x0 in, x0 out)
 *
 * The straight-line loop `lab bench` measures each backend's raw instruction rate with:
 * per iteration 256 ALU instructions (four interleaved add/eor chains) + subs + b.ne,
 * one translation block inside one page (p2align 12). Only caller-saved registers are used.
 */
	.text
	.globl	lab_spin
	.type	lab_spin, @function
	.p2align 12
lab_spin:
	mov	x9, #1
	mov	x10, #2
	mov	x11, #3
	mov	x12, #4
1:
	.rept	64
	add	x9, x9, x10
	eor	x10, x10, x11
	add	x11, x11, x12
	eor	x12, x12, x9
	.endr
	subs	x0, x0, #1
	b.ne	1b
	mov	x0, x9
	ret
	.size	lab_spin, . - lab_spin
