//! Prebuilt relocatable objects and static archives, checked with the `object` crate before
//! ld.lld links them with the lab's driver: the machine, the object kind, what the freestanding
//! image cannot give them (writable data is read-only during calls, no thread pointer, no ifunc
//! resolver, no libc, no RISC-V linker relaxation in ld.lld 14), and that every contract symbol
//! is defined, global and in code. Each error names the object (`libk.a(md5.o)`) and symbol.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::archive::ArchiveFile;
use object::{
    Architecture, BinaryFormat, Endianness, Object, ObjectKind, ObjectSection, ObjectSymbol, RelocationFlags,
    RelocationTarget, SectionFlags, SymbolFlags, SymbolKind,
};

use crate::variant::Arch;

/// Why prebuilt objects cannot be linked into a kernel image.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The file cannot be read.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// Not an ELF object or archive the lab can read.
    #[error("{name}: {why}")]
    Unreadable { name: String, why: String },
    /// The object is for another machine.
    #[error("{name}: an object for {found}, but the variant is {expected} (wrong architecture)")]
    WrongArch { name: String, found: String, expected: Arch },
    /// The freestanding image cannot give the object what it needs.
    #[error("{name}: refused: {why}")]
    Refused { name: String, why: String },
    /// Symbols referenced and defined by nothing that is linked.
    #[error("undefined references (the image links only the driver and your kernel, no libc): {}", list(.0))]
    Undefined(Vec<(String, String)>),
    /// A contract's symbol is not defined (global) by any object.
    #[error("symbol `{symbol}` (for {contract}) is not defined by {where_}{near}")]
    MissingSymbol { symbol: String, contract: String, where_: String, near: String },
}

fn list(refs: &[(String, String)]) -> String {
    refs.iter().map(|(s, o)| format!("`{s}` in {o}")).collect::<Vec<_>>().join(", ")
}

/// One linkable unit: an object file or an archive member, and what it defines and needs.
#[derive(Debug, Clone, Default)]
pub struct Unit {
    /// `path` or `archive.a(member.o)`.
    pub name: String,
    /// Global (or weak) symbols defined here, with whether they lie in executable code.
    pub defined: Vec<(String, bool)>,
    /// Local symbols (not visible to the linker's `--defsym`).
    pub local: Vec<String>,
    /// Undefined symbols it references (weak references left out: they resolve to 0).
    pub undefined: Vec<String>,
    /// Common symbols (`.comm`): tentative definitions a real one overrides at link time
    /// (cryptogams' `.comm OPENSSL_armcap_P` outside the kernel flavour).
    pub common: Vec<String>,
    /// Why the image cannot hold it, if it cannot (raised only when it is linked).
    pub refused: Option<String>,
}

/// Reads `path` (a relocatable ELF object or a `!<arch>` static archive) for `arch`: the
/// object itself, or every member of the archive.
///
/// # Errors
/// I/O, an unreadable file or member, or a wrong machine (these fail whether or not the unit
/// would be linked).
pub fn read(path: &Path, arch: Arch) -> Result<(Vec<Unit>, bool), ObjectError> {
    let data = std::fs::read(path).map_err(|source| ObjectError::Io { path: path.to_path_buf(), source })?;
    let name = path.display().to_string();
    if !data.starts_with(b"!<arch>\n") {
        return Ok((vec![unit(&name, &data, arch)?], false));
    }
    let bad = |e: object::Error| ObjectError::Unreadable { name: name.clone(), why: format!("bad archive: {e}") };
    let archive = ArchiveFile::parse(&*data).map_err(bad)?;
    let mut units = Vec::new();
    for member in archive.members() {
        let member = member.map_err(bad)?;
        let member_name = format!("{name}({})", String::from_utf8_lossy(member.name()));
        // Members start at any even offset; `object` reads ELF headers in place and needs them
        // aligned, so each member is copied (a fresh allocation is malloc-aligned).
        let copy = member.data(&*data).map_err(bad)?.to_vec();
        units.push(unit(&member_name, &copy, arch)?);
    }
    Ok((units, true))
}

/// `found` as a reader calls it.
fn machine(found: Architecture, bits64: bool) -> String {
    let name = match found {
        Architecture::Riscv64 => "riscv64",
        Architecture::Riscv32 => "riscv32",
        Architecture::Aarch64 => "aarch64",
        Architecture::Arm => "32-bit arm",
        Architecture::X86_64 => "x86_64",
        Architecture::X86_64_X32 => "x86_64 x32 (ILP32)",
        Architecture::I386 => "i386",
        other => return format!("{other:?} ({}-bit)", if bits64 { 64 } else { 32 }),
    };
    name.to_string()
}

fn expected_arch(arch: Arch) -> Architecture {
    arch.spec().elf
}

/// Reads one ELF object.
fn unit(name: &str, data: &[u8], arch: Arch) -> Result<Unit, ObjectError> {
    let file = object::File::parse(data).map_err(|e| ObjectError::Unreadable {
        name: name.to_string(),
        why: format!("not an ELF relocatable object or `ar` archive ({e})"),
    })?;
    if file.format() != BinaryFormat::Elf {
        let why = format!("a {:?} file; the lab links ELF objects", file.format());
        return Err(ObjectError::Unreadable { name: name.to_string(), why });
    }
    if file.architecture() != expected_arch(arch) || !file.is_64() {
        return Err(ObjectError::WrongArch {
            name: name.to_string(),
            found: machine(file.architecture(), file.is_64()),
            expected: arch,
        });
    }
    if file.endianness() != Endianness::Little {
        return Err(ObjectError::WrongArch {
            name: name.to_string(),
            found: format!("big-endian {arch}"),
            expected: arch,
        });
    }
    if file.kind() != ObjectKind::Relocatable {
        let why = format!("a {:?} ELF file, not a relocatable object (`.o`, built with -c)", file.kind());
        return Err(ObjectError::Refused { name: name.to_string(), why });
    }
    let mut u = Unit { name: name.to_string(), refused: refusal(&file), ..Unit::default() };
    for s in file.symbols() {
        let Ok(sym) = s.name() else { continue };
        if sym.is_empty() || s.kind() == SymbolKind::Section || s.kind() == SymbolKind::File {
            continue;
        }
        if s.is_undefined() {
            if !s.is_weak() {
                u.undefined.push(sym.to_string());
            }
        } else if s.is_common() {
            u.common.push(sym.to_string());
        } else if s.is_global() || s.is_weak() {
            let exec = s.section_index().and_then(|i| file.section_by_index(i).ok()).is_some_and(|sec| {
                matches!(sec.flags(), SectionFlags::Elf { sh_flags, .. } if sh_flags.contains(elf::SHF_EXECINSTR))
            });
            u.defined.push((sym.to_string(), exec));
        } else {
            u.local.push(sym.to_string());
        }
    }
    Ok(u)
}

/// Why the freestanding image cannot hold `file`, if it cannot.
fn refusal(file: &object::File<'_>) -> Option<String> {
    for sec in file.sections() {
        let SectionFlags::Elf { sh_flags, sh_type } = sec.flags() else { continue };
        let sec_name = sec.name().unwrap_or("?");
        if sh_flags.contains(elf::SHF_TLS) {
            return Some(format!(
                "thread-local section `{sec_name}`: the image sets up no thread pointer (TLS) for kernels"
            ));
        }
        let wa = elf::SHF_WRITE | elf::SHF_ALLOC;
        if sh_flags.contains(wa) && sec.size() > 0 && sh_type != elf::SHT_INIT_ARRAY {
            return Some(format!(
                "writable section `{sec_name}` ({} bytes): the lab maps a kernel's writable data read-only during \
                 calls (a HotSpot stub has none); keep constants in .rodata",
                sec.size()
            ));
        }
        for (_, rel) in sec.relocations() {
            if let Some(why) = relocation_refusal(file, rel.flags(), rel.target()) {
                return Some(format!("relocation in `{sec_name}`: {why}"));
            }
        }
    }
    for s in file.symbols() {
        let SymbolFlags::Elf { st_info, .. } = s.flags() else { continue };
        let name = s.name().unwrap_or("?");
        if st_info.st_type() == elf::STT_GNU_IFUNC {
            return Some(format!("`{name}` is an ifunc (STT_GNU_IFUNC): the image has no run-time resolver"));
        }
        if s.kind() == SymbolKind::Tls {
            return Some(format!("`{name}` is thread-local (TLS): the image sets up no thread pointer"));
        }
    }
    None
}

fn relocation_refusal(file: &object::File<'_>, flags: RelocationFlags, target: RelocationTarget) -> Option<String> {
    let RelocationFlags::Elf { r_type } = flags else { return None };
    if file.architecture() == Architecture::Riscv64 && r_type == elf::R_RISCV_ALIGN {
        return Some(
            "R_RISCV_ALIGN: the object was assembled with linker relaxation, which ld.lld 14 cannot do; \
             rebuild it with -mno-relax"
                .into(),
        );
    }
    let RelocationTarget::Symbol(i) = target else { return None };
    let sym = file.symbol_by_index(i).ok()?;
    (sym.kind() == SymbolKind::Tls)
        .then(|| format!("against thread-local `{}`: the image sets up no thread pointer", sym.name().unwrap_or("?")))
}

/// Symbols ld.lld defines itself when referenced.
const LINKER_DEFINED: &[&str] = &["_GLOBAL_OFFSET_TABLE_", "__global_pointer$"];

/// What is linked: every object, and the archive members the objects' references and the
/// contract symbols pull in (ld.lld's rule, transitively).
pub struct Selection {
    /// The units linked.
    pub linked: Vec<Unit>,
}

/// Chooses what is linked from `objects` (always) and `archives` (members on demand), given
/// the user's symbol for each contract (`wanted`: contract symbol, user's symbol), and checks
/// it: refusals of linked units, undefined references, and each wanted symbol defined, global
/// and in code.
///
/// # Errors
/// The first problem, naming the object and symbol.
pub fn select(
    objects: Vec<Unit>,
    archives: Vec<Vec<Unit>>,
    wanted: &[(String, String)],
) -> Result<Selection, ObjectError> {
    let mut linked = objects;
    let mut pool: Vec<Unit> = archives.into_iter().flatten().collect();
    let mut need: Vec<String> = wanted.iter().map(|(_, s)| s.clone()).collect();
    loop {
        let defined: BTreeSet<&str> = linked.iter().flat_map(|u| u.defined.iter().map(|(s, _)| s.as_str())).collect();
        need.extend(linked.iter().flat_map(|u| u.undefined.iter().cloned()));
        need.retain(|s| !defined.contains(s.as_str()));
        let Some(i) = pool.iter().position(|m| m.defined.iter().any(|(s, _)| need.contains(s))) else { break };
        linked.push(pool.remove(i));
    }
    if let Some(u) = linked.iter().find(|u| u.refused.is_some()) {
        return Err(ObjectError::Refused { name: u.name.clone(), why: u.refused.clone().unwrap_or_default() });
    }
    let defined: BTreeSet<&str> = linked.iter().flat_map(|u| u.defined.iter().map(|(s, _)| s.as_str())).collect();
    let wanted_names: BTreeSet<&str> = wanted.iter().map(|(_, s)| s.as_str()).collect();
    let mut undefined: Vec<(String, String)> = linked
        .iter()
        .flat_map(|u| u.undefined.iter().map(move |s| (s.clone(), u.name.clone())))
        .filter(|(s, _)| !defined.contains(s.as_str()) && !LINKER_DEFINED.contains(&s.as_str()))
        .filter(|(s, _)| !wanted_names.contains(s.as_str()))
        .collect();
    undefined.dedup();
    for (contract, symbol) in wanted {
        check_wanted(&linked, &pool, contract, symbol)?;
    }
    if !undefined.is_empty() {
        return Err(ObjectError::Undefined(undefined));
    }
    Ok(Selection { linked })
}

/// `symbol` must be defined, global and in code in a linked unit.
fn check_wanted(linked: &[Unit], pool: &[Unit], contract: &str, symbol: &str) -> Result<(), ObjectError> {
    let missing = |near: String| ObjectError::MissingSymbol {
        symbol: symbol.to_string(),
        contract: contract.to_string(),
        where_: names(linked),
        near,
    };
    if let Some(u) = linked.iter().find(|u| u.defined.iter().any(|(s, _)| s == symbol)) {
        return match u.defined.iter().any(|(s, exec)| s == symbol && *exec) {
            true => Ok(()),
            false => Err(ObjectError::Refused {
                name: u.name.clone(),
                why: format!("`{symbol}` (for {contract}) is not in an executable section"),
            }),
        };
    }
    if let Some(u) = linked.iter().chain(pool).find(|u| u.local.iter().any(|s| s == symbol)) {
        return Err(missing(format!(": {} defines it as a local symbol (add `.globl {symbol}`)", u.name)));
    }
    let near = linked
        .iter()
        .flat_map(|u| u.defined.iter().map(move |(s, _)| (s, &u.name)))
        .map(|(s, o)| (strsim::levenshtein(s, symbol), s, o))
        .filter(|(d, s, _)| *d <= 3 || s.eq_ignore_ascii_case(symbol))
        .min()
        .map(|(_, s, o)| format!("; {o} defines `{s}`: misspelt?"))
        .unwrap_or_default();
    Err(missing(near))
}

fn names(units: &[Unit]) -> String {
    match units {
        [] => "any object (none given)".into(),
        [one] => one.name.clone(),
        many => format!("any of {}", many.iter().map(|u| u.name.as_str()).collect::<Vec<_>>().join(", ")),
    }
}

/// The architecture of an object (or of an archive's first member) from its ELF machine.
///
/// # Errors
/// Unreadable, or for a machine the lab does not run.
pub fn arch_of(path: &Path) -> Result<Arch, ObjectError> {
    let data = std::fs::read(path).map_err(|source| ObjectError::Io { path: path.to_path_buf(), source })?;
    let name = path.display().to_string();
    let unreadable = |why: String| ObjectError::Unreadable { name: name.clone(), why };
    let member;
    let bytes: &[u8] = if data.starts_with(b"!<arch>\n") {
        let archive = ArchiveFile::parse(&*data).map_err(|e| unreadable(format!("bad archive: {e}")))?;
        member = archive.members().next().ok_or_else(|| unreadable("an empty archive".into()))?;
        member.map_err(|e| unreadable(e.to_string()))?.data(&*data).map_err(|e| unreadable(e.to_string()))?
    } else {
        &data
    };
    let bytes = bytes.to_vec();
    let file = object::File::parse(&*bytes).map_err(|e| unreadable(format!("not an ELF object ({e})")))?;
    Arch::ALL.into_iter().find(|&a| expected_arch(a) == file.architecture() && file.is_64()).ok_or_else(|| {
        unreadable(format!("an object for {}, which the lab does not run", machine(file.architecture(), file.is_64())))
    })
}
