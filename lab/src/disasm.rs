//! The one disassembler: `llvm-objdump` (Debian package `llvm`) over an image, one listing per
//! image and feature set, cached on disk next to the image, so a report can show the instruction
//! at a fault's PC, the ISA scan ([`crate::isa`]) can see what does not decode, and `lab bench`
//! can classify what ran ([`InsnClass`], per architecture in [`crate::arch`]).
//!
//! Two feature sets matter: a variant's own (`Variant::mattr`: what does not decode there is
//! outside its ISA) and the widest one per architecture (`IsaSpec::wide_mattr`, from the arch
//! rows), used to print any instruction, extension or not. The x86 disassembler ignores
//! features, so x86 legality and classes are decided from the bytes with iced-x86.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::arch::Arch;
pub use crate::toolchain::LLVM_OBJDUMP;
use crate::toolchain::{self, ToolchainError};

pub use crate::vocab::insn::{Insn, InsnClass};

impl Insn {
    /// Its class on `arch` (the architecture's rules, `ArchSpec::classify`).
    pub fn class(&self, arch: Arch) -> InsnClass {
        (arch.spec().classify)(self)
    }
}

/// Every instruction of an image's code sections, by address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    insns: BTreeMap<u64, Insn>,
}

/// Errors while disassembling.
#[derive(Debug, thiserror::Error)]
pub enum DisasmError {
    /// `llvm-objdump` is missing.
    #[error(transparent)]
    Tool(#[from] ToolchainError),
    /// It ran and failed.
    #[error("{command} failed: {stderr}")]
    Failed { command: String, stderr: String },
}

impl Listing {
    /// The instruction starting at `addr`.
    pub fn at(&self, addr: u64) -> Option<&Insn> {
        self.insns.get(&addr)
    }

    /// Every instruction, in address order.
    pub fn iter(&self) -> impl Iterator<Item = &Insn> {
        self.insns.values()
    }

    /// Parses `llvm-objdump -d` output: lines `   11122: b3 d2 62 60  \tror\tt0, t0, t1`.
    pub fn parse(text: &str) -> Listing {
        let insns = text
            .lines()
            .filter_map(|line| {
                let (addr, rest) = line.trim_start().split_once(':')?;
                let addr = u64::from_str_radix(addr, 16).ok()?;
                let (bytes, asm) = rest.split_once('\t')?;
                let bytes: Vec<u8> =
                    bytes.split_whitespace().map(|b| u8::from_str_radix(b, 16)).collect::<Result<_, _>>().ok()?;
                if bytes.is_empty() {
                    return None;
                }
                let text = asm.split_whitespace().collect::<Vec<_>>().join(" ");
                Some((addr, Insn { addr, bytes, text }))
            })
            .collect();
        Listing { insns }
    }

    /// [`Listing::of`] with every extension the disassembler knows (`IsaSpec::wide_mattr`):
    /// prints any instruction of `arch`.
    ///
    /// # Errors
    /// As [`Listing::of`].
    pub fn wide(image_path: &Path, arch: Arch) -> Result<Listing, DisasmError> {
        Listing::of(image_path, arch, &arch.spec().isa.wide_mattr())
    }

    /// Disassembles `image_path` for `arch` with `mattr`, or reads the cached listing
    /// (`<image>.<hash of mattr>.objdump`, next to the content-addressed image).
    ///
    /// # Errors
    /// `llvm-objdump` missing (naming the `llvm` package) or failing.
    pub fn of(image_path: &Path, arch: Arch, mattr: &str) -> Result<Listing, DisasmError> {
        let cache = cache_path(image_path, mattr);
        if let Ok(text) = std::fs::read_to_string(&cache) {
            return Ok(Listing::parse(&text));
        }
        let objdump = toolchain::find(LLVM_OBJDUMP)?;
        let mut cmd = Command::new(objdump);
        cmd.arg("-d");
        if !mattr.is_empty() {
            cmd.arg(format!("--mattr={mattr}"));
        }
        cmd.args(arch.spec().objdump_args).arg(image_path);
        let command = format!("{cmd:?}").replace('"', "");
        let out = crate::tool_run::output(&mut cmd, crate::tool_run::BUILD)
            .map_err(|e| DisasmError::Failed { command: command.clone(), stderr: e.to_string() })?;
        if !out.status.success() {
            return Err(DisasmError::Failed { command, stderr: String::from_utf8_lossy(&out.stderr).into_owned() });
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // Best effort: a read-only cache folder only costs the next run a disassembly.
        let tmp = cache.with_extension("tmp");
        if std::fs::write(&tmp, &text).is_ok() {
            let _ = std::fs::rename(&tmp, &cache);
        }
        Ok(Listing::parse(&text))
    }
}

fn cache_path(image_path: &Path, mattr: &str) -> PathBuf {
    let h = crate::fnv::fnv1a(mattr.as_bytes());
    let name = image_path.file_name().unwrap_or_default().to_string_lossy();
    image_path.with_file_name(format!("{name}.{h:016x}.objdump"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_llvm_objdump_lines() {
        let text =
            "0000000000011120 <f>:\n   11120: 2e 95        \tadd\ta0, a0, a1\n   11122: b3 d2 62 60  \t<unknown>\n\n";
        let l = Listing::parse(text);
        assert_eq!(l.iter().count(), 2);
        let add = l.at(0x11120).unwrap();
        assert_eq!(
            (add.bytes.as_slice(), add.text.as_str(), add.unknown()),
            (&[0x2e, 0x95][..], "add a0, a0, a1", false)
        );
        assert!(l.at(0x11122).unwrap().unknown());
    }
}
