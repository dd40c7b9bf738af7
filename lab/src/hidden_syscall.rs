//! System calls hidden from the instruction decode (issue 28): the static scan
//! ([`crate::isa::scan`]) decodes instructions from the start of each symbol, so a system-call
//! encoding that starts inside another instruction (x86 `b8 0f 05 90 90` is `mov eax, ...` from
//! its first byte and `syscall` from its second), or sits in data inside an executable section
//! (an aarch64 `$d` literal word `d4000001`, entered by a branch), is never seen. This search
//! looks for the encodings themselves at every position an instruction may start:
//!
//! - x86_64: every byte offset, for `syscall` (`0f 05`), `sysenter` (`0f 34`) and `int 0x80`
//!   (`cd 80`) (Intel SDM vol. 2B);
//! - riscv64: every 2-byte offset (instructions are 2-byte aligned with the C extension), for
//!   `ecall` (`0x00000073`, RISC-V unprivileged ISA, "Environment Call and Breakpoints");
//! - aarch64: every 4-byte aligned word, code or data, for `svc #imm16` (`0xd4000001 | imm16 << 5`,
//!   Arm ARM C6.2 "SVC").
//!
//! A hit the decode already saw as a system-call instruction of symbol code (reported by the
//! scan, or the driver's own between `lab_syscalls_begin` and `lab_syscalls_end`) is not
//! repeated; every other hit is a violation naming its address, the enclosing instruction (or
//! data) and its symbol.

use crate::disasm::Listing;
use crate::image::Image;
use crate::isa::Violation;
use crate::variant::Arch;

/// Every position in `bytes` (loaded at `vaddr`) where one of `arch`'s system-call encodings
/// starts, as (address, encoding name).
pub fn encodings_in(arch: Arch, vaddr: u64, bytes: &[u8]) -> Vec<(u64, &'static str)> {
    let spec = &arch.spec().syscall;
    let (encs, step) = (spec.encodings, spec.step);
    // Positions aligned in the address space, not in the segment.
    let first = ((step as u64 - vaddr % step as u64) % step as u64) as usize;
    let mut out = Vec::new();
    for at in (first..bytes.len()).step_by(step) {
        for e in encs {
            let Some(window) = bytes.get(at..at + e.bytes.len()) else { continue };
            if window.iter().zip(e.bytes).zip(e.mask).all(|((b, want), m)| b & m == want & m) {
                out.push((vaddr + at as u64, e.name));
            }
        }
    }
    out
}

/// The system-call encodings of `image`'s executable segments that the decode in `listing`
/// did not see as a system-call instruction of symbol code, outside the driver's range
/// `allowed`; `is_syscall` says whether a decoded instruction is one.
pub fn hidden(
    image: &Image,
    listing: &Listing,
    allowed: Option<&std::ops::Range<u64>>,
    is_syscall: impl Fn(&crate::disasm::Insn) -> bool,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for seg in image.segments.iter().filter(|s| s.perms.exec) {
        for (addr, name) in encodings_in(image.arch, seg.vaddr, &seg.data) {
            if allowed.is_some_and(|r| r.contains(&addr)) {
                continue;
            }
            let seen = listing.at(addr).is_some_and(|i| is_syscall(i) && image.is_symbol_code(addr));
            if seen {
                continue;
            }
            out.push(violation(image, listing, addr, name));
        }
    }
    out
}

/// The violation for a hidden `name` at `addr`: inside which decoded instruction (or data).
fn violation(image: &Image, listing: &Listing, addr: u64, name: &str) -> Violation {
    let enclosing = listing
        .iter()
        .take_while(|i| i.addr <= addr)
        .last()
        .filter(|i| addr < i.addr + i.bytes.len() as u64 && image.is_symbol_code(i.addr));
    let (insn, inside) = match enclosing {
        Some(i) if i.addr == addr => (i.text.clone(), "decoded there only outside symbol code".to_string()),
        Some(i) => (i.text.clone(), format!("{} byte(s) into this instruction at {:#x}", addr - i.addr, i.addr)),
        None => (format!("{name} (data)"), "in data of an executable section (never decoded)".to_string()),
    };
    Violation {
        addr,
        place: image.symbolize(addr),
        insn,
        why: format!(
            "a system call hidden from the decode: the bytes of `{name}` start at {addr:#x}, {inside}; a jump \
             there makes the call (guest kernels may not make system calls)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_encodings_are_found_at_every_byte_offset() {
        // mov eax, 0x9090050f; nop; int 0x80
        let bytes = [0xb8, 0x0f, 0x05, 0x90, 0x90, 0x90, 0xcd, 0x80];
        assert_eq!(encodings_in(Arch::X86_64, 0x1000, &bytes), vec![(0x1001, "syscall"), (0x1006, "int 0x80")]);
        assert!(encodings_in(Arch::X86_64, 0x1000, &[0x0f]).is_empty(), "a truncated encoding");
    }

    #[test]
    fn riscv_ecall_is_found_at_two_byte_offsets_only() {
        // c.nop, then ecall at +2; a copy at an odd offset is no instruction start.
        let bytes = [0x01, 0x00, 0x73, 0x00, 0x00, 0x00, 0x00, 0x73, 0x00, 0x00, 0x00];
        assert_eq!(encodings_in(Arch::Riscv64, 0x2000, &bytes), vec![(0x2002, "ecall")]);
    }

    #[test]
    fn aarch64_svc_with_any_immediate_is_found_in_aligned_words() {
        let svc_42 = (0xd400_0001u32 | 42 << 5).to_le_bytes();
        let hvc = 0xd400_0002u32.to_le_bytes();
        let bytes = [hvc, svc_42, [0, 0x01, 0x00, 0x00]].concat();
        assert_eq!(encodings_in(Arch::Aarch64, 0x3000, &bytes), vec![(0x3004, "svc")]);
        // A segment that starts off a word boundary: positions follow addresses.
        assert_eq!(encodings_in(Arch::Aarch64, 0x3002, &[&[0, 0][..], &svc_42[..]].concat()), vec![(0x3004, "svc")]);
    }
}
