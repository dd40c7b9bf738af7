//! The steady-state block loop of a kernel's multi-block stub, taken from the built image: the
//! stub's symbol gives the code range, its disassembly ([`Image::listing`]) the branches, and a
//! back-edge (a branch to an address at or below itself inside the stub) closes a candidate loop
//! `[target, branch]`. Among the candidates the one whose length is a whole multiple of the
//! measured instructions per block (Unicorn, aligned input) is the steady state: the loop a long
//! call spends its time in. No offsets are kept by hand, so an edited kernel is followed.
//!
//! [`SteadyLoop::mca_source`] turns the loop into assembly text for `llvm-mca` (branch targets
//! become labels; x86 keeps the listing's Intel syntax).

use super::workload::Workload;
use crate::disasm::InsnClass;
use crate::disasm::{Insn, Listing};
use crate::image::{Image, Symbol};
use crate::variant::{Arch, Kernel, MD5_IMPL_COMPRESS_MB, POLY1305_PROCESS_BLOCKS};

/// Most blocks one loop iteration may process (an unrolled loop).
const MAX_BLOCKS_PER_ITERATION: u32 = 64;

/// The multi-block stub of `kernel`, whose loop is the steady state of a long call.
pub fn multi_block_stub(kernel: Kernel) -> &'static str {
    match kernel {
        Kernel::Md5 => MD5_IMPL_COMPRESS_MB,
        Kernel::Poly1305 => POLY1305_PROCESS_BLOCKS,
    }
}

/// One loop of a stub, in address order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteadyLoop {
    /// The symbol holding the loop head (the stub, or a helper it calls).
    pub symbol: String,
    /// Architecture of the code (syntax of [`Insn::text`]).
    pub arch: Arch,
    /// Offset of the back-edge target (the loop head) from the symbol.
    pub head: u64,
    /// Offset of the back-edge branch from the symbol.
    pub back_edge: u64,
    /// Blocks one iteration processes.
    pub blocks_per_iteration: u32,
    /// The instructions from the head to the back-edge, both included.
    pub insns: Vec<Insn>,
}

/// The direct target of a branch's text (`bge a3, a2, 0x1128a <sym+0x14>` -> 0x1128a).
fn branch_target(text: &str) -> Option<u64> {
    let operands = text.split('<').next()?.trim_end();
    let last = operands.rsplit([' ', ',']).next()?;
    u64::from_str_radix(last.strip_prefix("0x")?, 16).ok()
}

fn is_branch(arch: Arch, insn: &Insn) -> bool {
    insn.class(arch) == InsnClass::Branch
}

/// Every back-edge of the stub: (branch address, target), in address order.
pub(super) fn back_edges(arch: Arch, insns: &[&Insn], start: u64) -> Vec<(u64, u64)> {
    insns
        .iter()
        .filter(|i| is_branch(arch, i))
        .filter_map(|i| Some((i.addr, branch_target(&i.text)?)))
        .filter(|&(at, target)| target >= start && target <= at)
        .collect()
}

/// The multi-block stub `kernel` runs through in `image`'s contract family: its name and
/// symbol.
///
/// # Errors
/// The image defines no such stub.
pub fn stub(image: &Image, kernel: Kernel) -> Result<(&'static str, Symbol), String> {
    let family = Workload::of(kernel, 1, 0).family_in(image);
    let symbol = Workload::of(kernel, 2, 0).stub_in(family);
    let sym = image.entry(symbol).ok_or_else(|| format!("the image defines no {symbol}"))?;
    Ok((symbol, sym))
}

/// [`stub`], whose code must have a size (a loop is searched inside it).
///
/// # Errors
/// As [`stub`]; or the symbol has no size.
pub fn sized_stub(image: &Image, kernel: Kernel) -> Result<(&'static str, Symbol), String> {
    let (symbol, sym) = stub(image, kernel)?;
    if sym.size == 0 {
        return Err(format!("{symbol} has no size: add `.size {symbol}, . - {symbol}` to the source"));
    }
    Ok((symbol, sym))
}

/// Finds the steady-state loop of `kernel` in `image`, given the measured instructions per
/// block on aligned input: first inside the multi-block contract symbol of the image's family
/// (`md5_implCompressMB`, `md5_block_data_order`, ...), then, when that symbol only wraps a
/// helper (an OpenSSL adapter calling its inner block function), in the functions of the
/// kernels' code it branches to directly; offsets are then from the symbol holding the loop.
///
/// # Errors
/// The stub is missing or has no size, the disassembly is unavailable, or no back-edge closes
/// a loop of a whole multiple of `per_block` instructions (the steady state is then not one
/// straight run of code, and a prediction from it would be wrong).
pub fn find(image: &Image, kernel: Kernel, per_block: f64) -> Result<SteadyLoop, String> {
    let (symbol, sym) = sized_stub(image, kernel)?;
    let listing = image.listing().map_err(|e| e.to_string())?;
    let stub = (sym.addr, sym.addr + sym.size);
    let edges = match find_in(image, listing, stub, per_block) {
        Ok(lp) => return Ok(lp),
        Err(edges) => edges,
    };
    for callee in callees(image, listing, stub) {
        if let Ok(lp) = find_in(image, listing, callee, per_block) {
            return Ok(lp);
        }
    }
    Err(format!(
        "no loop in {symbol} or the functions it calls is a whole multiple of the measured {per_block} \
         instructions per block (back-edges in {symbol}: {})",
        if edges.is_empty() { "none".to_string() } else { edges.join(", ") }
    ))
}

/// Blocks per iteration of the loop around a call's most executed code, from how often that
/// code ran in two long calls: `runs` in a `blocks`-block call and `runs_half` in one of half as
/// many blocks. The difference cancels the groups a vector path handles outside its loop (a
/// first group, a final reduction tree), which a single call's `blocks / runs` counts in.
///
/// # Errors
/// The difference is not a whole number of blocks per iteration within 1..=64.
pub fn blocks_per_iteration(blocks: u64, runs: u64, runs_half: u64) -> Result<u32, String> {
    let extra = blocks - blocks / 2;
    let more = runs.saturating_sub(runs_half);
    match u32::try_from(extra / more.max(1)) {
        Ok(k) if more > 0 && extra.is_multiple_of(more) && (1..=MAX_BLOCKS_PER_ITERATION).contains(&k) => Ok(k),
        _ => Err(format!(
            "the most executed code ran {runs} times in a {blocks}-block call and {runs_half} times in a {}-block \
             call: not a loop of 1 to {MAX_BLOCKS_PER_ITERATION} blocks per iteration",
            blocks / 2
        )),
    }
}

/// Finds the steady-state loop of a kernel whose cost is not linear in blocks (a vector path
/// from some length on): the innermost back-edge loop, in the multi-block stub, a function it
/// calls, or the function holding `hot` (a dispatch path's `blocks`, reached through the
/// function pointer its `poly1305_init` returns), around `hot`, the block whose executions grow
/// most with a long call's length, whose loop handles `k` blocks per iteration
/// ([`blocks_per_iteration`]).
///
/// # Errors
/// As [`find`]; or no back-edge closes a loop around `hot`.
pub fn find_hot(image: &Image, kernel: Kernel, hot: u64, k: u32) -> Result<SteadyLoop, String> {
    let (symbol, sym) = stub(image, kernel)?;
    let listing = image.listing().map_err(|e| e.to_string())?;
    let stub = (sym.addr, sym.addr + sym.size);
    let holder = image.symbol_containing(hot).filter(|(_, s)| s.size > 0).map(|(_, s)| (s.addr, s.addr + s.size));
    for (start, end) in std::iter::once(stub).chain(callees(image, listing, stub)).chain(holder) {
        let insns: Vec<&Insn> = listing.iter().filter(|i| i.addr >= start && i.addr < end).collect();
        let around = back_edges(image.arch, &insns, start).into_iter().filter(|&(at, t)| t <= hot && hot <= at);
        if let Some((at, target)) = around.min_by_key(|&(at, t)| at - t) {
            let body: Vec<Insn> =
                insns.iter().filter(|i| i.addr >= target && i.addr <= at).map(|&i| i.clone()).collect();
            let (name, base) =
                image.symbol_containing(target).map_or((String::new(), start), |(n, s)| (n.to_string(), s.addr));
            return Ok(SteadyLoop {
                symbol: name,
                arch: image.arch,
                head: target - base,
                back_edge: at - base,
                blocks_per_iteration: k,
                insns: body,
            });
        }
    }
    Err(format!(
        "no back-edge in {symbol}, the functions it calls or the function holding it closes a loop around {}",
        image.symbolize(hot)
    ))
}

/// The sized symbols of the kernels' code ([`Image::kernel_code`]) that direct branches in
/// `[start, end)` lead to outside it (an adapter's call to its inner block function), as
/// address ranges, each once.
fn callees(image: &Image, listing: &Listing, (start, end): (u64, u64)) -> Vec<(u64, u64)> {
    let Some((code_start, code_end)) = image.kernel_code() else { return Vec::new() };
    let mut out = Vec::new();
    let mut auipc: Option<(u64, &str, i64)> = None;
    for insn in listing.iter().filter(|i| i.addr >= start && i.addr < end) {
        let target = branch_target(&insn.text).or_else(|| riscv_call_target(auipc, &insn.text));
        auipc = riscv_auipc(insn);
        let Some(t) = target.filter(|t| !(start..end).contains(t)) else { continue };
        if !(code_start..code_end).contains(&t) {
            continue;
        }
        if let Some((_, s)) = image.symbol_containing(t).filter(|(_, s)| s.size > 0) {
            if !out.contains(&(s.addr, s.addr + s.size)) {
                out.push((s.addr, s.addr + s.size));
            }
        }
    }
    out
}

/// The first loop in `[start, end)` of a whole multiple of `per_block` instructions, or the
/// back-edges seen there (a decoding failure is reported as one).
fn find_in(
    image: &Image,
    listing: &Listing,
    (start, end): (u64, u64),
    per_block: f64,
) -> Result<SteadyLoop, Vec<String>> {
    let insns: Vec<&Insn> = listing.iter().filter(|i| i.addr >= start && i.addr < end).collect();
    if let Some(bad) = insns.iter().find(|i| i.unknown()) {
        return Err(vec![format!("{} does not decode", image.symbolize(bad.addr))]);
    }
    let edges = back_edges(image.arch, &insns, start);
    for &(at, target) in &edges {
        let body: Vec<Insn> = insns.iter().filter(|i| i.addr >= target && i.addr <= at).map(|&i| i.clone()).collect();
        let ratio = body.len() as f64 / per_block;
        let k = ratio.round();
        if per_block > 0.0 && (ratio - k).abs() < 1e-9 && (1.0..=f64::from(MAX_BLOCKS_PER_ITERATION)).contains(&k) {
            let (name, base) =
                image.symbol_containing(target).map_or((String::new(), start), |(n, s)| (n.to_string(), s.addr));
            return Ok(SteadyLoop {
                symbol: name,
                arch: image.arch,
                head: target - base,
                back_edge: at - base,
                blocks_per_iteration: k as u32,
                insns: body,
            });
        }
    }
    Err(edges
        .iter()
        .map(|&(at, t)| {
            let n = insns.iter().filter(|i| i.addr >= t && i.addr <= at).count();
            format!("{}..{} ({n} instructions)", image.symbolize(t), image.symbolize(at))
        })
        .collect())
}

/// `auipc rd, imm20` as (its address, rd, the added offset imm20 << 12, sign-extended).
fn riscv_auipc(insn: &Insn) -> Option<(u64, &str, i64)> {
    let (rd, imm) = insn.text.strip_prefix("auipc")?.trim().split_once(',')?;
    let imm: i64 = imm.trim().parse().ok()?;
    let imm = if imm >= 1 << 19 { imm - (1 << 20) } else { imm };
    Some((insn.addr, rd.trim(), imm << 12))
}

/// The target of `jalr off(rd)` right after `auipc rd, ...` (riscv64's `call`, which the
/// listing shows as the pair, with no resolved target).
fn riscv_call_target(auipc: Option<(u64, &str, i64)>, text: &str) -> Option<u64> {
    let (at, rd, hi) = auipc?;
    let operand = text.strip_prefix("jalr")?.trim().rsplit(',').next()?.trim();
    let (off, reg) = operand.strip_suffix(')')?.split_once('(')?;
    let off: i64 = off.trim().parse().ok()?;
    (reg == rd).then(|| at.wrapping_add_signed(hi + off))
}

impl SteadyLoop {
    /// `md5_implCompressMB+0x2e..+0x726`.
    pub fn span(&self) -> String {
        format!("{}+{:#x}..+{:#x}", self.symbol, self.head, self.back_edge)
    }

    /// Assembly text for `llvm-mca`: one instruction per line, `<symbol+off>` comments dropped,
    /// every direct branch target replaced by a label (`.Lat_<addr>` inside the loop,
    /// `.Lexit` outside it), Intel syntax declared on x86.
    pub fn mca_source(&self) -> String {
        let first = self.insns.first().map_or(0, |i| i.addr);
        let last = self.insns.last().map_or(0, |i| i.addr);
        let targets: Vec<u64> = self
            .insns
            .iter()
            .filter(|i| is_branch(self.arch, i))
            .filter_map(|i| branch_target(&i.text))
            .filter(|t| (first..=last).contains(t))
            .collect();
        let mut s = String::new();
        s.push_str(self.arch.spec().asm_prologue);
        for i in &self.insns {
            if targets.contains(&i.addr) {
                s.push_str(&format!(".Lat_{:x}:\n", i.addr));
            }
            let text = i.text.split('<').next().unwrap_or_default().trim_end();
            match branch_target(text).filter(|_| is_branch(self.arch, i)) {
                Some(t) => {
                    let label = if (first..=last).contains(&t) { format!(".Lat_{t:x}") } else { ".Lexit".to_string() };
                    let cut = text.rfind("0x").unwrap_or(text.len());
                    s.push_str(&format!("{}{label}\n", &text[..cut]));
                }
                None => s.push_str(&format!("{text}\n")),
            }
        }
        s.push_str(".Lexit:\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RVV loop at VLEN 1024 (32 blocks per iteration) runs its loop 6 times in 256 blocks
    /// and twice in 128 (one group before it, one in the final tree): 256 / 6 would say 43.
    #[test]
    fn blocks_per_iteration_cancel_the_groups_outside_the_loop() {
        assert_eq!(blocks_per_iteration(256, 6, 2), Ok(32));
        assert_eq!(blocks_per_iteration(256, 63, 31), Ok(4));
        assert_eq!(blocks_per_iteration(256, 256, 128), Ok(1));
        assert!(blocks_per_iteration(256, 7, 2).is_err_and(|e| e.contains("7 times in a 256-block call")));
        assert!(blocks_per_iteration(256, 2, 2).is_err(), "no difference: not a loop");
        assert_eq!(blocks_per_iteration(256, 3, 1), Ok(64));
        assert!(blocks_per_iteration(256, 1, 0).is_err(), "128 blocks per iteration: more than 64");
    }

    #[test]
    fn branch_targets_are_read_from_each_syntax() {
        assert_eq!(branch_target("bge a3, a2, 0x1128a <.Lpcrel_hi0+0x14>"), Some(0x1128a));
        assert_eq!(branch_target("b.le 0x210290 <md5_implCompressMB+0x18>"), Some(0x210290));
        assert_eq!(branch_target("tbnz x0, #63, 0x210dfc <write_all+0x40>"), Some(0x210dfc));
        assert_eq!(branch_target("jle 0x201180 <md5_implCompressMB+0x10>"), Some(0x201180));
        assert_eq!(branch_target("ret"), None);
        assert_eq!(branch_target("lw t0, 4(t2)"), None);
    }

    #[test]
    fn a_riscv64_call_pair_gives_its_target() {
        let insn = |addr, text: &str| Insn { addr, bytes: vec![0; 4], text: text.into() };
        let (call, other) = (insn(0x11b1e, "auipc\tra, 1048575"), insn(0x1000, "auipc t1, 2"));
        let auipc = riscv_auipc(&call).unwrap();
        assert_eq!(riscv_call_target(Some(auipc), "jalr\t1854(ra)"), Some(0x11b1e - 0x1000 + 1854));
        assert_eq!(riscv_call_target(Some(auipc), "jalr\tra, 16(t1)"), None);
        let up = riscv_auipc(&other).unwrap();
        assert_eq!(riscv_call_target(Some(up), "jalr ra, -8(t1)"), Some(0x1000 + 0x2000 - 8));
    }

    #[test]
    fn mca_source_labels_the_loop_head_and_exits() {
        let insn = |addr, text: &str| Insn { addr, bytes: vec![0; 4], text: text.into() };
        let l = SteadyLoop {
            symbol: "md5_implCompressMB".into(),
            arch: Arch::Riscv64,
            head: 0x2e,
            back_edge: 0x3a,
            blocks_per_iteration: 1,
            insns: vec![
                insn(0x10, "andi t0, a0, 3"),
                insn(0x14, "bnez t0, 0x400 <x+0x3f0>"),
                insn(0x18, "addi a0, a0, 64"),
                insn(0x1c, "bge a3, a2, 0x10 <x>"),
            ],
        };
        assert_eq!(
            l.mca_source(),
            ".Lat_10:\nandi t0, a0, 3\nbnez t0, .Lexit\naddi a0, a0, 64\nbge a3, a2, .Lat_10\n.Lexit:\n"
        );
    }
}
