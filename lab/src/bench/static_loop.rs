//! Instructions per block counted statically from the loop text, for the rows no counter can
//! run (AVX-512: Unicorn 2.1.5 and qemu 7.2 have none, and this host has no PMU): the steady
//! loop is read from the image's disassembly, never executed.
//!
//! The loop: among the back-edge loops of the multi-block stub ([`super::steady`]), the one
//! whose instructions need the latest-declared extension of the variant (x86: iced-x86's CPUID
//! features per instruction against each declared extension's features; IFMA's `vpmadd52luq`
//! needs AVX512_IFMA), the innermost (fewest instructions) of those. Blocks per iteration: the
//! loop's advance of the input pointer (the contract's first argument, `add rdi, 256` in
//! the x86_64 IFMA loop) over the kernel's block size. Per block = the loop's instructions, head to
//! back-branch included, over that. A model of what a long call executes, not a count of it.

use serde::{Deserialize, Serialize};

use super::steady::{self, SteadyLoop};
use super::workload::Workload;
use crate::arch::{x86_64, Legality};
use crate::disasm::Insn;
use crate::image::Image;
use crate::variant::{Kernel, Variant};
use crate::vocab::insn::{operands, parse_imm};

/// One row: a loop counted from its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StaticCount {
    /// Variant name.
    pub variant: String,
    /// Kernel name.
    pub kernel: String,
    /// The loop (`poly1305_processBlocks+0x5c0..+0x6d4`).
    pub loop_span: String,
    /// Instructions from its head to its back-branch, both included.
    pub loop_instructions: usize,
    /// Blocks one iteration processes (its input advance / the block size).
    pub blocks_per_iteration: u32,
    /// Instructions per block.
    pub per_block: f64,
    /// The extension whose instructions chose the loop (`avx512ifma`).
    pub extension: String,
    /// How it was counted, for the report: "counted statically from the loop text".
    pub counter: String,
}

/// The counter's label in rows and JSON.
pub const COUNTER: &str = "counted statically from the loop text";

/// The index in `variant.extensions` of the latest-declared extension `insn` needs, if any.
fn extension_rank(variant: &Variant, insn: &Insn) -> Option<usize> {
    let isa = &variant.arch.spec().isa;
    let features = x86_64::decode(&insn.bytes, insn.addr).cpuid_features().to_vec();
    variant
        .extensions
        .iter()
        .enumerate()
        .filter(|(_, name)| isa.extension(name).is_some_and(|e| e.cpuid.iter().any(|f| features.contains(f))))
        .map(|(i, _)| i)
        .max()
}

/// Bytes the loop adds to register `reg` (`add rdi, 0x80`; `lea rdi, [rdi + 0x80]`).
fn advance(body: &[Insn], reg: &str) -> i64 {
    body.iter()
        .filter_map(|i| {
            let ops = operands(&i.text);
            let (dst, src) = ops.split_once(',')?;
            if dst.trim() != reg {
                return None;
            }
            match i.mnemonic() {
                "add" => parse_imm(src),
                "sub" => parse_imm(src).map(i64::wrapping_neg),
                "lea" => {
                    let inner = src.trim().strip_prefix('[')?.strip_suffix(']')?;
                    let (base, off) = inner.split_once('+')?;
                    (base.trim() == reg).then(|| parse_imm(off)).flatten()
                }
                _ => None,
            }
        })
        .sum()
}

/// The steady loop of `kernel` in `image` of `variant`, chosen and sized from its text
/// (module doc), as a row and as a loop llvm-mca can simulate.
///
/// # Errors
/// Not an x86_64 row (only those go uncounted), the stub missing or without size, no loop
/// using a declared extension, or no whole number of blocks advanced per iteration.
pub fn find(image: &Image, variant: &Variant, kernel: Kernel) -> Result<(StaticCount, SteadyLoop), String> {
    if !matches!(variant.arch.spec().isa.legality, Legality::Cpuid(_)) {
        return Err(format!("{variant}: static loop counts are for x86_64 rows (the others are counted)"));
    }
    let (symbol, sym) = super::steady::sized_stub(image, kernel)?;
    let listing = image.listing().map_err(|e| e.to_string())?;
    let insns: Vec<&Insn> = listing.iter().filter(|i| i.addr >= sym.addr && i.addr < sym.addr + sym.size).collect();
    let body = |(at, t): (u64, u64)| -> Vec<Insn> {
        insns.iter().filter(|i| i.addr >= t && i.addr <= at).map(|&i| i.clone()).collect()
    };
    let rank_of = |b: &[Insn]| b.iter().filter_map(|i| extension_rank(variant, i)).max();
    let loops: Vec<((u64, u64), Vec<Insn>)> =
        steady::back_edges(image.arch, &insns, sym.addr).into_iter().map(|e| (e, body(e))).collect();
    let Some(rank) = loops.iter().filter_map(|(_, b)| rank_of(b)).max() else {
        return Err(format!("no loop in {symbol} uses an extension {variant} declares"));
    };
    // the innermost: a branch back to the scalar code after a vector path also closes a
    // "loop" around that path
    let best = loops.into_iter().filter(|(_, b)| rank_of(b) == Some(rank)).min_by_key(|(_, b)| b.len());
    let Some(((at, head), body)) = best else { return Err(format!("no loop in {symbol} at its top extension")) };
    let input = variant.arch.spec().abi.args[0];
    let bytes = advance(&body, input);
    let block = Workload::block_bytes(kernel) as i64;
    if bytes <= 0 || bytes % block != 0 {
        return Err(format!(
            "the loop {}..{} advances {input} by {bytes} bytes, not a whole number of {block}-byte blocks",
            image.symbolize(head),
            image.symbolize(at)
        ));
    }
    let k = u32::try_from(bytes / block).map_err(|_| format!("{bytes} bytes per iteration"))?;
    let lp = SteadyLoop {
        symbol: symbol.to_string(),
        arch: image.arch,
        head: head - sym.addr,
        back_edge: at - sym.addr,
        blocks_per_iteration: k,
        insns: body,
    };
    let row = StaticCount {
        variant: variant.name.into(),
        kernel: kernel.name().into(),
        loop_span: lp.span(),
        loop_instructions: lp.insns.len(),
        blocks_per_iteration: k,
        per_block: lp.insns.len() as f64 / f64::from(k),
        extension: variant.extensions[rank].to_string(),
        counter: COUNTER.into(),
    };
    Ok((row, lp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(text: &str) -> Insn {
        Insn { addr: 0, bytes: Vec::new(), text: text.into() }
    }

    #[test]
    fn the_input_advance_adds_adds_subs_and_leas_of_that_register_only() {
        let body = [
            insn("add rdi, 0x40"),
            insn("lea rdi, [rdi + 0x40]"),
            insn("add rsi, 0x80"),
            insn("sub rdi, 16"),
            insn("add rdi, rax"),
        ];
        assert_eq!(advance(&body, "rdi"), 0x40 + 0x40 - 16);
        assert_eq!(advance(&body, "rsi"), 0x80);
        assert_eq!(advance(&body, "rdx"), 0);
    }
}
