//! A capture as a relocatable ELF object (the `object` crate's writer) and a `kernel-lab.toml`
//! manifest naming it. The stubs keep their layout: one `.text` section spanning them all, each
//! stub at its offset from the first, the gaps (code of other stubs the lab did not capture)
//! filled with the arch row's trap byte (x86 `int3`), and the section aligned to 64 bytes so
//! each stub keeps its alignment (HotSpot aligns stubs to `CodeEntryAlignment`, 32 or 64 on
//! x86). Constant areas the stubs read go into `.rodata` the same way, and each RIP-relative
//! displacement into them becomes an `R_X86_64_PC32` relocation (System V AMD64 psABI §4.4:
//! S + A - P), so it reaches the same byte wherever the linker puts the two sections.

use std::path::{Path, PathBuf};

use object::write::{Object, Relocation, Symbol, SymbolSection};
use object::{elf, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags, SymbolKind, SymbolScope};

use super::{Capture, CaptureError};

/// Most bytes a capture's section may span (the stubs lie within one code blob).
const MAX_SPAN: u64 = 16 << 20;

/// First line of a manifest `lab capture` writes; it marks the file as the capture's own.
pub const MANIFEST_NOTE: &str = "# Written by `lab capture`";

/// The object's bytes.
///
/// # Errors
/// The stubs span more than [`MAX_SPAN`], or the writer fails.
pub fn object_bytes(c: &Capture) -> Result<Vec<u8>, CaptureError> {
    let blocks: Vec<(u64, &[u8])> = c.stubs.iter().map(|s| (s.start, s.bytes.as_slice())).collect();
    let (base, text) = span(&blocks, c.arch.spec().hotspot.gap_fill)?;
    let mut obj = Object::new(BinaryFormat::Elf, c.arch.spec().elf, Endianness::Little);
    let section = obj.add_section(Vec::new(), b".text".to_vec(), SectionKind::Text);
    obj.append_section_data(section, &text, 64);
    for s in &c.stubs {
        obj.add_symbol(Symbol {
            name: s.contract.as_bytes().to_vec(),
            value: s.start - base,
            size: s.bytes.len() as u64,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(section),
            flags: SymbolFlags::None,
        });
    }
    // Constant areas in clusters, one `.rodata` section each: a stub may read both a block of
    // the code cache and a static table of libjvm.so, gigabytes apart.
    for cluster in clusters(&c.data) {
        let blocks: Vec<(u64, &[u8])> = cluster.iter().map(|d| (d.start, d.bytes.as_slice())).collect();
        let (data_base, bytes) = span(&blocks, 0)?;
        let data_end = data_base + bytes.len() as u64;
        let rodata = obj.add_section(Vec::new(), b".rodata".to_vec(), SectionKind::ReadOnlyData);
        obj.append_section_data(rodata, &bytes, 64);
        let target = obj.section_symbol(rodata);
        for s in &c.stubs {
            for r in s.constants.iter().filter(|r| (data_base..data_end).contains(&r.target)) {
                // S + A - P = target - next: A = (target - data_base) - (next - displacement).
                let addend = (r.target - data_base) as i64 - (r.next - r.disp_at) as i64;
                let flags = RelocationFlags::Elf { r_type: elf::R_X86_64_PC32 };
                let relocation = Relocation { offset: s.start - base + r.disp_at, symbol: target, addend, flags };
                obj.add_relocation(section, relocation)
                    .map_err(|e| CaptureError::Unsupported(format!("cannot relocate `{}`: {e}", s.hotspot)))?;
            }
        }
    }
    obj.write().map_err(|e| CaptureError::Unsupported(format!("cannot write the ELF object: {e}")))
}

/// The data blocks in address order, split where one starts more than [`CLUSTER_GAP`] past the
/// end of the one before.
fn clusters(data: &[super::DataBlock]) -> Vec<Vec<&super::DataBlock>> {
    let mut sorted: Vec<&super::DataBlock> = data.iter().collect();
    sorted.sort_by_key(|d| d.start);
    let mut out: Vec<Vec<&super::DataBlock>> = Vec::new();
    for d in sorted {
        let end = |v: &Vec<&super::DataBlock>| v.iter().map(|b| b.start + b.bytes.len() as u64).max().unwrap_or(0);
        match out.last_mut() {
            Some(last) if d.start <= end(last).saturating_add(CLUSTER_GAP) => last.push(d),
            _ => out.push(vec![d]),
        }
    }
    out
}

/// Largest gap between constant blocks kept in one section.
const CLUSTER_GAP: u64 = 1 << 20;

/// `blocks` (address, bytes) laid out at their offsets from the first, gaps filled with `fill`:
/// (the first address, the bytes).
///
/// # Errors
/// They span more than [`MAX_SPAN`].
fn span(blocks: &[(u64, &[u8])], fill: u8) -> Result<(u64, Vec<u8>), CaptureError> {
    let base = blocks.iter().map(|b| b.0).min().unwrap_or(0);
    let end = blocks.iter().map(|b| b.0 + b.1.len() as u64).max().unwrap_or(base);
    if end - base > MAX_SPAN {
        return Err(CaptureError::Unsupported(format!(
            "the captured blocks span {} bytes of the code cache (more than {MAX_SPAN}): capture fewer with --stub",
            end - base
        )));
    }
    let mut out = vec![fill; usize::try_from(end - base).unwrap_or(0)];
    for (start, bytes) in blocks {
        let at = usize::try_from(start - base).unwrap_or(0);
        out[at..at + bytes.len()].copy_from_slice(bytes);
    }
    Ok((base, out))
}

/// Writes `<variant>.o` into `dir` (created if missing); returns its path.
///
/// # Errors
/// As [`object_bytes`], or the file cannot be written.
pub fn write_object(c: &Capture, dir: &Path) -> Result<PathBuf, CaptureError> {
    let bytes = object_bytes(c)?;
    std::fs::create_dir_all(dir).map_err(|source| CaptureError::Io { path: dir.to_path_buf(), source })?;
    let path = dir.join(format!("{}.o", c.variant_name()));
    std::fs::write(&path, bytes).map_err(|source| CaptureError::Io { path: path.clone(), source })?;
    Ok(path)
}

/// Writes the object and `kernel-lab.toml` into `dir`; returns the manifest's path.
///
/// # Errors
/// As [`write_object`].
pub fn write(c: &Capture, dir: &Path) -> Result<PathBuf, CaptureError> {
    let object = write_object(c, dir)?;
    let path = dir.join(crate::user_kernel::manifest::FILE_NAME);
    std::fs::write(&path, manifest_text(c, &object))
        .map_err(|source| CaptureError::Io { path: path.clone(), source })?;
    Ok(path)
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The manifest: one variant, the object by file name, the contract symbols as they are.
fn manifest_text(c: &Capture, object: &Path) -> String {
    let file = object.file_name().unwrap_or_default().to_string_lossy();
    let stubs: Vec<String> =
        c.stubs.iter().map(|s| format!("#   {} at {:#x}, {} bytes", s.hotspot, s.start, s.bytes.len())).collect();
    let data: String = c
        .data
        .iter()
        .map(|d| format!("#   constants {} at {:#x}, {} bytes\n", d.hotspot, d.start, d.bytes.len()))
        .collect();
    let absent = if c.absent.is_empty() {
        String::new()
    } else {
        format!("# not generated by this JVM: {}\n", c.absent.join(", "))
    };
    let symbols: Vec<String> = c.stubs.iter().map(|s| format!("{} = {}", s.contract, quoted(s.contract))).collect();
    format!(
        "{MANIFEST_NOTE} from {}.\n# Stubs:\n{}\n{data}{absent}[[variant]]\nname = {}\narch = {}\nisa = {}\nobjects = [{}]\n\
         # HotSpot's stubs are handed (and return) the accumulators the JDK's Java code leaves\n\
         poly1305_acc = \"jdk\"\n[variant.symbols]\n{}\n",
        c.describe(),
        stubs.join("\n"),
        quoted(&c.variant_name()),
        quoted(c.arch.name()),
        quoted(&c.isa),
        quoted(&file),
        symbols.join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::super::{Capture, Stub};
    use super::*;
    use object::{Object as _, ObjectSymbol as _};

    #[test]
    fn stubs_keep_their_offsets_and_sizes() {
        let c = Capture {
            arch: crate::variant::Arch::X86_64,
            jdk: "17".into(),
            from: "test".into(),
            flags: Vec::new(),
            stubs: vec![
                Stub {
                    hotspot: "md5_implCompress".into(),
                    contract: "md5_implCompress",
                    start: 0x1000,
                    bytes: vec![0xc3],
                    constants: Vec::new(),
                },
                Stub {
                    hotspot: "md5_implCompressMB".into(),
                    contract: "md5_implCompressMB",
                    start: 0x1040,
                    bytes: vec![0x90, 0xc3],
                    constants: Vec::new(),
                },
            ],
            data: Vec::new(),
            isa: "x86-64".into(),
            absent: vec!["poly1305_processBlocks"],
        };
        let bytes = object_bytes(&c).unwrap();
        let f = object::File::parse(&*bytes).unwrap();
        let syms: Vec<(String, u64, u64)> = f
            .symbols()
            .filter(|s| s.is_global())
            .map(|s| (s.name().unwrap().to_string(), s.address(), s.size()))
            .collect();
        assert_eq!(syms, vec![("md5_implCompress".into(), 0, 1), ("md5_implCompressMB".into(), 0x40, 2)]);
        let d = tempfile::tempdir().unwrap();
        let m = write(&c, d.path()).unwrap();
        let k = crate::user_kernel::manifest::load(&m).unwrap();
        assert_eq!((k[0].name.as_str(), k[0].isa.text.as_str()), ("hotspot-17", "x86-64"));
        assert!(std::fs::read_to_string(&m).unwrap().contains("not generated by this JVM: poly1305_processBlocks"));
    }
}
