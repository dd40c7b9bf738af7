/*
 * uint64_t lab_spin(uint64_t iterations)  -- x86-64 (SysV psABI: rdi in, rax out)
 *
 * The straight-line loop `lab bench` measures each backend's raw instruction rate with:
 * per iteration 256 ALU instructions (four interleaved add/xor chains) + dec + jnz,
 * one translation block inside one page (p2align 12). Only caller-saved registers are used.
 */
	.intel_syntax noprefix
	.text
	.globl	lab_spin
	.type	lab_spin, @function
	.p2align 12
lab_spin:
	mov	eax, 1
	mov	ecx, 2
	mov	edx, 3
	mov	r8d, 4
1:
	.rept	64
	add	rax, rcx
	xor	rcx, rdx
	add	rdx, r8
	xor	r8, rax
	.endr
	dec	rdi
	jnz	1b
	ret
	.size	lab_spin, . - lab_spin
