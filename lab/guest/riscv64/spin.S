/*
 * uint64_t lab_spin(uint64_t iterations)  -- riscv64, RV64GC (LP64D: a0 in, a0 out)
 *
 * The straight-line loop `lab bench` measures each backend's raw instruction rate with:
 * per iteration 256 ALU instructions (four interleaved add/xor chains) + addi + bnez.
 * The loop is one translation block inside one page (p2align 12; 4 + 516 bytes, since the
 * assembler compresses the adds and xors). Only caller-saved registers are used.
 */
	.option norelax
	.text
	.globl	lab_spin
	.type	lab_spin, @function
	.p2align 12
lab_spin:
	li	t0, 1
	li	t1, 2
	li	t2, 3
	li	t3, 4
1:
	.rept	64
	add	t0, t0, t1
	xor	t1, t1, t2
	add	t2, t2, t3
	xor	t3, t3, t0
	.endr
	addi	a0, a0, -1
	bnez	a0, 1b
	mv	a0, t0
	ret
	.size	lab_spin, . - lab_spin
