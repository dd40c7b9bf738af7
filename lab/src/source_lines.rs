//! Addresses of a linked image mapped back to the kernel source: the DWARF line table clang
//! writes for every `.S` it assembles with `-g` (lab/src/toolchain.rs), read with `object` and
//! `addr2line`. The assembler follows the preprocessor's line markers, so a line names the
//! `.S` file and its line, not the preprocessed text. An image without DWARF (built before the
//! lab passed `-g`, or a user's prebuilt object without it) maps nothing, and says nothing: the
//! callers fall back to the symbol and offset.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use addr2line::gimli;
use object::{Object, ObjectSection, ObjectSymbol};

/// A place in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    /// The file as the DWARF names it, joined to the compilation folder (absolute when the
    /// assembler was given an absolute path, as the lab gives it).
    pub file: PathBuf,
    /// 1-based line.
    pub line: u32,
}

/// The source line of each address in `pcs` that the line table of the ELF image at `image`
/// covers; addresses it does not cover are left out. An unreadable file, a malformed ELF or
/// DWARF, or an image without debug sections gives an empty map, never a panic.
pub fn lookup(image: &Path, pcs: &[u64]) -> HashMap<u64, SourceLine> {
    let Ok(bytes) = std::fs::read(image) else { return HashMap::new() };
    let Some(ctx) = context(&bytes) else { return HashMap::new() };
    pcs.iter().filter_map(|&pc| Some((pc, locate(&ctx, pc)?))).collect()
}

/// The addresses of the symbols in `names` that the ELF image at `image` defines; an
/// unreadable or malformed file gives an empty map.
pub fn symbols(image: &Path, names: &[&str]) -> HashMap<String, u64> {
    let Ok(bytes) = std::fs::read(image) else { return HashMap::new() };
    let Ok(file) = object::File::parse(&*bytes) else { return HashMap::new() };
    // Not `is_definition`: a label without `.type` or `.size` (common in assembly) is no
    // definition to `object`, yet it is where the code is.
    file.symbols()
        .filter(|s| !s.is_undefined() && s.section_index().is_some())
        .filter_map(|s| Some((s.name().ok()?, s.address())))
        .filter(|(n, _)| names.contains(n))
        .map(|(n, a)| (n.to_string(), a))
        .collect()
}

type Reader<'a> = gimli::EndianSlice<'a, gimli::RunTimeEndian>;

/// The DWARF of `bytes` (an ELF file) ready for look-ups; `None` when it is not an object file
/// or its DWARF cannot be parsed. Missing debug sections read as empty.
fn context(bytes: &[u8]) -> Option<addr2line::Context<Reader<'_>>> {
    let file = object::File::parse(bytes).ok()?;
    let endian = if file.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    let section = |id: gimli::SectionId| -> Result<Reader<'_>, gimli::Error> {
        let data = file.section_by_name(id.name()).and_then(|s| s.data().ok()).unwrap_or(&[]);
        Ok(gimli::EndianSlice::new(data, endian))
    };
    let dwarf = gimli::Dwarf::load(section).ok()?;
    addr2line::Context::from_dwarf(dwarf).ok()
}

/// The file and line of `pc`, when the line table has both.
fn locate(ctx: &addr2line::Context<Reader<'_>>, pc: u64) -> Option<SourceLine> {
    let loc = ctx.find_location(pc).ok()??;
    let line = loc.line.filter(|&l| l > 0)?;
    Some(SourceLine { file: PathBuf::from(loc.file?), line })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_no_image_maps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.elf");
        std::fs::write(&junk, b"\x7fELF not really").unwrap();
        assert!(lookup(&junk, &[0x1000]).is_empty());
        assert!(lookup(&dir.path().join("missing.elf"), &[0x1000]).is_empty());
    }
}
