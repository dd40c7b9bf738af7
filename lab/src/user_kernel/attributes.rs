//! The ISA a RISC-V object declares about itself: its `.riscv.attributes` section's
//! `Tag_RISCV_arch` (tag 5, a string such as `rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0_v1p0_zbb1p0`;
//! RISC-V ELF psABI, "RISC-V ELF Attributes"), which GNU as writes from `-march` for every
//! object and clang 14 for C (for assembly only from an `.attribute arch` directive).
//! `lab run --object` without `--isa` declares the extensions named there that the arch row
//! knows, so an object assembled for RVV or Zbb is judged against the ISA it was built for,
//! not against RV64GC (cryptogams' RVV build, assembled with GNU as, says `v1p0`).

use std::path::Path;

use object::read::archive::ArchiveFile;
use object::read::elf::AttributesSection;
use object::{LittleEndian, Object, ObjectSection};

use crate::variant::Arch;

/// `Tag_RISCV_arch` (psABI: an NTBS).
const TAG_RISCV_ARCH: u64 = 5;

/// The extensions beyond `arch`'s base ISA that the objects at `paths` declare in their
/// `Tag_RISCV_arch`, as the arch row's names in row order (`["v"]`, `["zbb"]`): empty when no
/// object has the attribute, when the arch has no such attributes (x86_64, aarch64) or when an
/// object cannot be read (reading it for the link reports that). Extensions the arch row does
/// not know are left out: the image scan names any instruction of theirs.
pub fn declared_extensions(paths: &[impl AsRef<Path>], arch: Arch) -> Vec<&'static str> {
    let isa = &arch.spec().isa;
    let mut found: Vec<&'static str> = Vec::new();
    for path in paths {
        let Ok(data) = std::fs::read(path.as_ref()) else { continue };
        for text in arch_strings(&data) {
            found.extend(extension_names(&text).filter_map(|n| isa.extension(&n)).map(|e| e.name));
        }
    }
    found.sort_by_key(|n| isa.extensions.iter().position(|e| e.name == *n));
    found.dedup();
    found
}

/// The `Tag_RISCV_arch` strings of an object or of each member of an archive.
fn arch_strings(data: &[u8]) -> Vec<String> {
    if !data.starts_with(b"!<arch>\n") {
        return arch_string(data).into_iter().collect();
    }
    let Ok(archive) = ArchiveFile::parse(data) else { return Vec::new() };
    archive.members().flatten().filter_map(|m| m.data(data).ok().and_then(arch_string)).collect()
}

/// The `Tag_RISCV_arch` string of one ELF object, if it has one.
fn arch_string(data: &[u8]) -> Option<String> {
    let file = object::File::parse(data).ok()?;
    let section = file.section_by_name(".riscv.attributes")?;
    let bytes = section.data().ok()?;
    let attributes = AttributesSection::<object::elf::FileHeader64<LittleEndian>>::new(LittleEndian, bytes).ok()?;
    for sub in attributes.subsections().ok()?.flatten() {
        if sub.vendor() != b"riscv" {
            continue;
        }
        for subsub in sub.subsubsections().flatten().filter(|s| s.tag() == object::elf::Tag_File) {
            let mut reader = subsub.attributes();
            while let Ok(Some(tag)) = reader.read_tag() {
                // psABI: odd tags carry a string, even ones a ULEB128 integer.
                if tag % 2 == 1 {
                    let value = reader.read_string().ok()?;
                    if tag == TAG_RISCV_ARCH {
                        return Some(String::from_utf8_lossy(value).into_owned());
                    }
                } else if reader.read_integer().is_err() {
                    break;
                }
            }
        }
    }
    None
}

/// The extension names of an arch string, versions dropped: `rv64i2p1_m2p0_v1p0_zbb1p0` gives
/// `i`, `m`, `v`, `zbb`; a run of single letters without versions (`rv64imafdcv`) gives each.
fn extension_names(text: &str) -> impl Iterator<Item = String> + '_ {
    let body = text.strip_prefix("rv64").or_else(|| text.strip_prefix("rv32")).unwrap_or(text);
    body.split('_').filter(|p| !p.is_empty()).flat_map(|part| {
        let name = strip_version(part);
        if name.len() > 1 && !name.starts_with(['z', 's', 'x']) {
            name.chars().map(String::from).collect::<Vec<_>>()
        } else {
            vec![name.to_owned()]
        }
    })
}

/// `zbb1p0` -> `zbb`, `i2p1` -> `i`, `v` -> `v` (a version is `<major>p<minor>` at the end).
fn strip_version(part: &str) -> &str {
    let no_minor = part.trim_end_matches(|c: char| c.is_ascii_digit());
    match no_minor.strip_suffix('p') {
        Some(rest) if rest.ends_with(|c: char| c.is_ascii_digit()) && no_minor.len() < part.len() => {
            rest.trim_end_matches(|c: char| c.is_ascii_digit())
        }
        _ => part,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gnu_and_llvm_arch_strings_name_their_extensions() {
        let gnu = "rv64i2p0_m2p0_a2p0_f2p0_d2p0_c2p0_v1p0_zmmul1p0_zve32f1p0_zvl128b1p0";
        let names: Vec<String> = extension_names(gnu).collect();
        assert_eq!(names, ["i", "m", "a", "f", "d", "c", "v", "zmmul", "zve32f", "zvl128b"]);
        let llvm: Vec<String> = extension_names("rv64i2p1_m2p0_c2p0_zicsr2p0_zbb1p0").collect();
        assert_eq!(llvm, ["i", "m", "c", "zicsr", "zbb"]);
        let bare: Vec<String> = extension_names("rv64imafdcv_zbb").collect();
        assert_eq!(bare, ["i", "m", "a", "f", "d", "c", "v", "zbb"]);
    }

    /// GNU as writes `Tag_RISCV_arch` from `-march` for every object; clang 14 writes it for
    /// assembly only from an `.attribute arch` directive, which this test writes (as GNU as
    /// would for `-march=rv64gcv_zbb`).
    #[test]
    fn an_objects_arch_attribute_declares_v_and_zbb_and_none_declares_nothing() {
        let dir = std::env::temp_dir().join(format!("lab-attr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let built = |name: &str, head: &str| {
            let src = dir.join(format!("{name}.S"));
            std::fs::write(&src, format!("{head}.text\n.globl f\nf: ret\n")).unwrap();
            let o = dir.join(format!("{name}.o"));
            let ok = std::process::Command::new("clang")
                .args(["--target=riscv64-linux-gnu", "-march=rv64gcv_zbb", "-c"])
                .arg(&src)
                .arg("-o")
                .arg(&o)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "clang {name}.S (clang from ci/setup.sh)");
            o
        };
        let gnu = ".attribute arch, \"rv64i2p0_m2p0_a2p0_f2p0_d2p0_c2p0_v1p0_zbb1p0_zvl128b1p0\"\n";
        assert_eq!(declared_extensions(&[built("gnu", gnu)], Arch::Riscv64), ["zbb", "v"]);
        assert!(declared_extensions(&[built("bare", "")], Arch::Riscv64).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
