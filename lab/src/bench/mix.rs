//! Instruction mix: the image's listing (the one disassembler, [`crate::disasm`]) gives every
//! instruction one class ([`InsnClass`], by the architecture's rules in [`crate::arch`]), and a
//! block profile weights the classes by how often each translation block ran.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::arch::Arch;
use crate::backend::icount::BlockProfile;
pub use crate::disasm::InsnClass;
use crate::disasm::Listing;
use crate::image::Image;

/// Executed instructions by class (per block, per call, or in total).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Mix {
    /// Loads.
    pub loads: f64,
    /// Stores.
    pub stores: f64,
    /// ALU instructions.
    pub alu: f64,
    /// Multiplies and divides.
    pub multiplies: f64,
    /// Branches, jumps, calls, returns.
    pub branches: f64,
    /// Extension instructions.
    pub extension: f64,
    /// SIMD/vector instructions ([`InsnClass::Vector`]).
    pub vector: f64,
}

impl Mix {
    /// Adds `n` instructions of `class`.
    pub fn add(&mut self, class: InsnClass, n: f64) {
        let slot = match class {
            InsnClass::Load => &mut self.loads,
            InsnClass::Store => &mut self.stores,
            InsnClass::Alu => &mut self.alu,
            InsnClass::Multiply => &mut self.multiplies,
            InsnClass::Branch => &mut self.branches,
            InsnClass::Extension => &mut self.extension,
            InsnClass::Vector => &mut self.vector,
        };
        *slot += n;
    }

    /// Sum over the classes.
    pub fn total(&self) -> f64 {
        self.loads + self.stores + self.alu + self.multiplies + self.branches + self.extension + self.vector
    }

    /// `(self - other) / n`, class by class: the mix of the blocks one profile ran more.
    pub fn per(&self, other: &Mix, n: f64) -> Mix {
        Mix {
            loads: (self.loads - other.loads) / n,
            stores: (self.stores - other.stores) / n,
            alu: (self.alu - other.alu) / n,
            multiplies: (self.multiplies - other.multiplies) / n,
            branches: (self.branches - other.branches) / n,
            extension: (self.extension - other.extension) / n,
            vector: (self.vector - other.vector) / n,
        }
    }
}

/// Every instruction of an image's code, by address.
#[derive(Debug, Clone)]
pub struct Disassembly {
    insns: BTreeMap<u64, (String, InsnClass)>,
}

impl Disassembly {
    /// The image's listing ([`Image::listing`], every extension decoded), classified.
    ///
    /// # Errors
    /// `llvm-objdump` missing (naming the Debian package) or failing.
    pub fn of(image: &Image) -> Result<Disassembly, String> {
        Ok(Disassembly::classify(image.arch, image.listing().map_err(|e| e.to_string())?))
    }

    /// Classifies every instruction of `listing` by `arch`'s rules.
    pub fn classify(arch: Arch, listing: &Listing) -> Disassembly {
        let insns = listing.iter().map(|i| (i.addr, (i.text.clone(), i.class(arch)))).collect();
        Disassembly { insns }
    }

    /// The classes of the `icount` instructions from `addr` (a translation block).
    ///
    /// # Errors
    /// When `addr` is not an instruction boundary or the block runs past the disassembly.
    pub fn block(&self, addr: u64, icount: u32) -> Result<Vec<InsnClass>, String> {
        let v: Vec<(u64, InsnClass)> =
            self.insns.range(addr..).take(icount as usize).map(|(&a, (_, c))| (a, *c)).collect();
        if v.first().map(|x| x.0) != Some(addr) || v.len() != icount as usize {
            return Err(format!("block at {addr:#x} ({icount} instructions) does not match the disassembly"));
        }
        if let Some((a, _)) = v.iter().find(|(a, _)| self.text(*a).is_some_and(|t| t.starts_with('<'))) {
            return Err(format!("llvm-objdump could not decode the executed instruction at {a:#x}"));
        }
        Ok(v.into_iter().map(|x| x.1).collect())
    }

    /// Every instruction in `start..end`: (address, text, class), by address.
    pub fn range(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, &str, InsnClass)> + '_ {
        self.insns.range(start..end).map(|(&a, (t, c))| (a, t.as_str(), *c))
    }

    /// The text of the instruction at `addr`, if one starts there.
    pub fn text(&self, addr: u64) -> Option<&str> {
        self.insns.get(&addr).map(|(t, _)| t.as_str())
    }

    /// The executed instructions of `profile`, by class.
    ///
    /// # Errors
    /// See [`block`](Self::block).
    pub fn mix(&self, profile: &BlockProfile) -> Result<Mix, String> {
        let mut m = Mix::default();
        for (addr, icount, execs) in profile.blocks() {
            for c in self.block(addr, icount)? {
                m.add(c, execs as f64);
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disasm::Insn;

    #[test]
    fn classes_follow_the_rules() {
        use InsnClass::*;
        let cases: &[(Arch, &str, &[u8], InsnClass)] = &[
            (Arch::Riscv64, "lw s0, 0(a0)", &[], Load),
            (Arch::Riscv64, "sd s0, 0(sp)", &[], Store),
            (Arch::Riscv64, "roriw a4, a4, 25", &[], Extension),
            (Arch::Riscv64, "bset a0, a0, a1", &[], Alu),
            (Arch::Riscv64, "bge a3, a2, 0x1128a", &[], Branch),
            (Arch::Riscv64, "c.sd s0, 0(sp)", &[], Store),
            (Arch::Riscv64, "mulhu t0, a0, a1", &[], Multiply),
            (Arch::Aarch64, "ldp x10, x11, [x3]", &[], Load),
            (Arch::Aarch64, "stp x19, x20, [sp, #-32]!", &[], Store),
            (Arch::Aarch64, "b.ne 0x210aa8", &[], Branch),
            (Arch::Aarch64, "umulh x1, x2, x3", &[], Multiply),
            (Arch::Aarch64, "ror w9, w9, #25", &[], Alu),
            // x86: classes from the bytes (encodings from `llvm-mc --show-encoding`).
            (Arch::X86_64, "add r8d, dword ptr [rdi + 4]", &[0x44, 0x03, 0x47, 0x04], Load),
            (Arch::X86_64, "mov dword ptr [rsi], r8d", &[0x44, 0x89, 0x06], Store),
            (Arch::X86_64, "add dword ptr [rdi], eax", &[0x01, 0x07], Store),
            (Arch::X86_64, "cmp qword ptr [rsi], 0", &[0x48, 0x83, 0x3e, 0x00], Load),
            (Arch::X86_64, "lea r8d, [r8 + rax - 0x28955b88]", &[0x45, 0x8d, 0x84, 0x00, 0x78, 0xa4, 0x6a, 0xd7], Alu),
            (Arch::X86_64, "nop dword ptr [rax + rax]", &[0x0f, 0x1f, 0x04, 0x00], Alu),
            (Arch::X86_64, "rol r8d, 7", &[0x41, 0xc1, 0xc0, 0x07], Alu),
            (Arch::X86_64, "mul r11", &[0x49, 0xf7, 0xe3], Multiply),
            (Arch::X86_64, "jle 0x201180", &[0x7e, 0x10], Branch),
            (Arch::X86_64, "ret", &[0xc3], Branch),
            (Arch::X86_64, "push rbx", &[0x53], Store),
            (Arch::X86_64, "syscall", &[0x0f, 0x05], Alu),
            (Arch::X86_64, "pop rbx", &[0x5b], Load),
            (Arch::X86_64, "rorx eax, ebx, 7", &[0xc4, 0xe3, 0x7b, 0xf0, 0xc3, 0x07], Extension),
            (Arch::X86_64, "adcx rax, rbx", &[0x66, 0x48, 0x0f, 0x38, 0xf6, 0xc3], Extension),
            (Arch::X86_64, "pshufb xmm0, xmm1", &[0x66, 0x0f, 0x38, 0x00, 0xc1], Vector),
            // Vector code of every row (x86 encodings from `llvm-mc-19 --show-encoding`).
            (Arch::X86_64, "vpaddd ymm0, ymm0, ymm2", &[0xc5, 0xfd, 0xfe, 0xc2], Vector),
            (Arch::X86_64, "vmovdqu ymm0, ymmword ptr [rdi]", &[0xc5, 0xfe, 0x6f, 0x07], Vector),
            (Arch::X86_64, "vpmadd52luq zmm0, zmm1, zmm2", &[0x62, 0xf2, 0xf5, 0x48, 0xb4, 0xc2], Vector),
            (Arch::X86_64, "kmovw k1, eax", &[0xc5, 0xf8, 0x92, 0xc8], Vector),
            (Arch::Aarch64, "add v0.4s, v1.4s, v2.4s", &[], Vector),
            (Arch::Aarch64, "ld1 { v0.16b, v1.16b }, [x1], #32", &[], Vector),
            (Arch::Aarch64, "str q8, [sp, #16]", &[], Vector),
            (Arch::Aarch64, "mul z0.d, z0.d, z1.d", &[], Vector),
            (Arch::Aarch64, "ptrue p0.d", &[], Vector),
            (Arch::Aarch64, "ld1d { z0.d }, p0/z, [x0]", &[], Vector),
            (Arch::Aarch64, "str d8, [sp, #16]", &[], Store),
            (Arch::Aarch64, "aese v0.16b, v1.16b", &[], Extension),
            (Arch::Riscv64, "vsetvli t0, a0, e64, m1, ta, ma", &[], Vector),
            (Arch::Riscv64, "vle64.v v8, (a0)", &[], Vector),
        ];
        for &(arch, text, bytes, want) in cases {
            let insn = Insn { addr: 0x1000, bytes: bytes.to_vec(), text: text.into() };
            assert_eq!(insn.class(arch), want, "{arch} {text}");
        }
    }

    #[test]
    fn classifies_a_listing_and_maps_blocks() {
        let text = "\n0000000000011258 <md5_implCompress>:\n   11258: 01 46        \tli\ta2, 0\n   1125a: 81 46        \tli\ta3, 0\n\n\
                    000000000001125c <md5_implCompressMB>:\n   1125c: 5d 71        \taddi\tsp, sp, -96\n   1125e: 22 e0        \tsd\ts0, 0(sp)\n";
        let d = Disassembly::classify(Arch::Riscv64, &Listing::parse(text));
        assert_eq!(d.text(0x1125e), Some("sd s0, 0(sp)"));
        assert_eq!(
            d.block(0x11258, 4).unwrap(),
            vec![InsnClass::Alu, InsnClass::Alu, InsnClass::Alu, InsnClass::Store]
        );
        assert!(d.block(0x11259, 1).is_err(), "not an instruction boundary");
        assert!(d.block(0x1125c, 3).is_err(), "runs past the end");
    }
}
