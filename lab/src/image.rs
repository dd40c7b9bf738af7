//! The linked kernel image: `PT_LOAD` segments and symbols read with the `object` crate, so no
//! backend hard-codes an address. One image per variant serves Unicorn, qemu-user and native.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use object::elf::{PF_R, PF_W, PF_X, PT_LOAD};
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{Architecture, Endianness, Object, ObjectSection, ObjectSymbol, SectionFlags, SymbolKind};

use std::sync::{Arc, OnceLock};

use crate::disasm::{DisasmError, Listing};
use crate::variant::Arch;

/// Errors while reading an image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// The file is not a 64-bit little-endian ELF the lab understands.
    #[error("{}: not a readable ELF64 image: {reason}", path.display())]
    Parse { path: PathBuf, reason: String },
    /// The ELF is for another machine.
    #[error("{}: ELF machine is {found:?}, expected {expected}", path.display())]
    WrongArch { path: PathBuf, expected: Arch, found: Architecture },
    /// A symbol the driver protocol needs is missing (kernels/README.md, "Symbols").
    #[error("{}: symbol `{symbol}` is missing (see kernels/README.md)", path.display())]
    MissingSymbol { path: PathBuf, symbol: &'static str },
}

/// Access rights of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Perms {
    /// Readable.
    pub read: bool,
    /// Writable.
    pub write: bool,
    /// Executable.
    pub exec: bool,
}

/// One `PT_LOAD` segment: `data` (file bytes) at `vaddr`, zero-filled up to `memsz`.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Guest virtual address of the first byte.
    pub vaddr: u64,
    /// Size in memory, bytes (at least `data.len()`; the rest is `.bss`).
    pub memsz: u64,
    /// The bytes stored in the file.
    pub data: Vec<u8>,
    /// Access rights from `p_flags`.
    pub perms: Perms,
}

/// A function or data symbol: address and size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol {
    /// Guest virtual address.
    pub addr: u64,
    /// `st_size`, bytes (0 when the source gave none).
    pub size: u64,
    /// Whether the symbol is global (`STB_GLOBAL`/`STB_WEAK`): an interface other code may
    /// call; a local one is the object's own helper.
    pub global: bool,
}

/// A loaded kernel image.
#[derive(Debug, Clone)]
pub struct Image {
    /// Where it was read from (qemu and native execute this file).
    pub path: PathBuf,
    /// Guest architecture from `e_machine`.
    pub arch: Arch,
    /// `PT_LOAD` segments in file order.
    pub segments: Vec<Segment>,
    symbols: BTreeMap<String, Symbol>,
    /// Contract entry aliases the lab linked (`lab_entry_<contract>`), by contract name.
    entries: BTreeMap<String, Symbol>,
    /// ELF mapping symbols (`$x`, `$d`, AArch64 and RISC-V psABI), sorted: (address, data).
    mapping: Vec<(u64, bool)>,
    /// Allocated writable sections (`.data`, `.bss`, ...): name, address, size.
    data_sections: Vec<(String, u64, u64)>,
    /// The widest disassembly, made on first use ([`Image::listing`]).
    listing: Arc<OnceLock<Listing>>,
}

/// Address and size of `lab_arena`, the batch area of the driver protocol, and the kernels'
/// own writable data the batch protects during calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arena {
    /// Guest address of the header (`lab_arena`).
    pub addr: u64,
    /// Usable bytes from `addr`.
    pub size: u64,
    /// Page-aligned `[start, end)` of the kernels' writable data (`.data`, `.bss` of every
    /// object linked before the driver), when there is any: HotSpot stubs have no writable
    /// globals, so the batch maps these pages read-only during calls. The driver's own data
    /// starts at [`KERNEL_DATA_END`], on a page of its own.
    pub kernel_data: Option<(u64, u64)>,
}

pub use crate::protocol::{ENTRY_PREFIX, KERNEL_DATA_END, KERNEL_TEXT_END};

/// How far past a code symbol's last byte an address still reads as "fell off the end of" it
/// ([`Image::symbolize`]): a fetch there is the function running out of its own code.
pub const FELL_OFF_REACH: u64 = 64;

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The mapping symbol kind of `name`: `Some(true)` for data (`$d`, `$d.N`), `Some(false)` for
/// code (`$x`, `$a`, `$t`, with or without `.N` or an ISA string), `None` for any other name.
/// AArch64 ELF (AAELF64 "Mapping symbols") and RISC-V ELF psABI ("Mapping Symbol").
fn mapping_kind(name: &str) -> Option<bool> {
    let rest = name.strip_prefix('$')?;
    let head = rest.split('.').next().unwrap_or_default();
    match head {
        "d" => Some(true),
        "x" | "a" | "t" => Some(false),
        // RISC-V `$x<ISA string>` (`$xrv64i2p1_m2p0`).
        h if h.starts_with("xrv") => Some(false),
        _ => None,
    }
}

fn arch_of(found: Architecture) -> Option<Arch> {
    Arch::ALL.into_iter().find(|a| a.spec().elf == found)
}

/// A global symbol without a size at the address of a sized global one is an alias of it (ld.lld
/// `--defsym md5_implCompress=my_md5`, user_kernel) and gets its size, so the contract symbols
/// of a user's kernel are sized like the lab's own.
fn size_aliases(elf: &ElfFile64<'_, Endianness>, symbols: &mut BTreeMap<String, Symbol>) {
    let globals: Vec<(String, u64, u64)> = elf
        .symbols()
        .filter(|s| s.is_global() && s.is_definition())
        .filter_map(|s| Some((s.name().ok()?.to_string(), s.address(), s.size())))
        .collect();
    for (name, addr, _) in globals.iter().filter(|g| g.2 == 0) {
        let target = globals.iter().find(|(n, a, sz)| a == addr && *sz > 0 && n != name);
        if let (Some((_, _, sized)), Some(sym)) = (target, symbols.get_mut(name)) {
            sym.size = *sized;
        }
    }
}

impl Image {
    /// Reads and parses the image at `path`, checking that it is for `expected`.
    ///
    /// # Errors
    /// [`ImageError`] for I/O, a malformed ELF, or the wrong machine.
    pub fn load(path: &Path, expected: Arch) -> Result<Image, ImageError> {
        let bytes = std::fs::read(path).map_err(|source| ImageError::Io { path: path.into(), source })?;
        let parse = |e: object::Error| ImageError::Parse { path: path.into(), reason: e.to_string() };
        let elf = ElfFile64::<Endianness>::parse(&*bytes).map_err(parse)?;
        let found = elf.architecture();
        if arch_of(found) != Some(expected) {
            return Err(ImageError::WrongArch { path: path.into(), expected, found });
        }
        let endian = elf.endian();
        let mut segments = Vec::new();
        for ph in elf.elf_header().program_headers(endian, &*bytes).map_err(parse)? {
            if ph.p_type(endian) != PT_LOAD {
                continue;
            }
            let flags = ph.p_flags(endian);
            segments.push(Segment {
                vaddr: ph.p_vaddr(endian),
                memsz: ph.p_memsz(endian),
                data: ph
                    .data(endian, &*bytes)
                    .map_err(|()| ImageError::Parse { path: path.into(), reason: "segment data out of range".into() })?
                    .to_vec(),
                perms: Perms { read: flags.contains(PF_R), write: flags.contains(PF_W), exec: flags.contains(PF_X) },
            });
        }
        let mut symbols: BTreeMap<String, Symbol> = elf
            .symbols()
            .filter(|s| {
                matches!(s.kind(), SymbolKind::Text | SymbolKind::Data | SymbolKind::Unknown | SymbolKind::Label)
            })
            .filter_map(|s| {
                Some((s.name().ok()?.to_string(), Symbol { addr: s.address(), size: s.size(), global: s.is_global() }))
            })
            .filter(|(name, _)| !name.is_empty() && !name.starts_with(".L"))
            .collect();
        size_aliases(&elf, &mut symbols);
        let entry_names: Vec<String> = symbols.keys().filter(|n| n.starts_with(ENTRY_PREFIX)).cloned().collect();
        let mut entries = BTreeMap::new();
        for name in entry_names {
            if let Some(sym) = symbols.remove(&name) {
                entries.insert(name[ENTRY_PREFIX.len()..].to_string(), sym);
            }
        }
        symbols.retain(|name, _| mapping_kind(name).is_none());
        let mut mapping: Vec<(u64, bool)> =
            elf.symbols().filter_map(|s| Some((s.address(), mapping_kind(s.name().ok()?)?))).collect();
        mapping.sort_unstable();
        let data_sections = elf
            .sections()
            .filter(|s| matches!(s.flags(), SectionFlags::Elf { sh_flags, .. } if sh_flags.contains(object::elf::SHF_WRITE | object::elf::SHF_ALLOC)))
            .filter_map(|s| Some((s.name().ok()?.to_string(), s.address(), s.size())))
            .collect();
        Ok(Image {
            path: path.into(),
            arch: expected,
            segments,
            symbols,
            entries,
            mapping,
            data_sections,
            listing: Arc::default(),
        })
    }

    /// The symbol called `name`, if the image defines it.
    pub fn symbol(&self, name: &str) -> Option<Symbol> {
        self.symbols.get(name).copied()
    }

    /// What the lab calls as contract symbol `contract`: the user's symbol it was mapped to
    /// (the `lab_entry_<contract>` alias, [`ENTRY_PREFIX`]), else the image's own `contract`.
    pub fn entry(&self, contract: &str) -> Option<Symbol> {
        self.entries.get(contract).copied().or_else(|| self.symbol(contract))
    }

    /// Whether `addr` lies in a region an ELF mapping symbol marks as data (`$d`): the last
    /// mapping symbol at or below it is a data one. Images without mapping symbols (x86_64)
    /// have none.
    pub fn is_mapped_data(&self, addr: u64) -> bool {
        let i = self.mapping.partition_point(|&(a, _)| a <= addr);
        i > 0 && self.mapping[i - 1].1
    }

    /// Whether the bytes at `addr` are code by the image's symbols, which the static scan
    /// decodes ([`crate::isa::scan`]): inside a code symbol ([`Image::symbol_containing`]:
    /// its `.size` bytes, or up to the next symbol when it has none) and not in a `$d` region.
    /// A string perlasm places after the last sized function of `.text` is not.
    pub fn is_symbol_code(&self, addr: u64) -> bool {
        self.symbol_containing(addr).is_some() && !self.is_mapped_data(addr)
    }

    /// A copy of this image whose symbol `name` has the address and size of symbol `target`
    /// (added when `name` is not there), or `None` when `target` is not defined. One image can
    /// so carry several versions of a stub, each run as the contract symbol in turn (tests
    /// build one image for many generated fixtures instead of one each).
    pub fn rebound(&self, name: &str, target: &str) -> Option<Image> {
        let sym = self.symbol(target)?;
        let mut image = self.clone();
        image.symbols.insert(name.to_string(), sym);
        Some(image)
    }

    /// The symbol called `name`, or [`ImageError::MissingSymbol`].
    ///
    /// # Errors
    /// When the image does not define it.
    pub fn require(&self, name: &'static str) -> Result<Symbol, ImageError> {
        self.symbol(name).ok_or(ImageError::MissingSymbol { path: self.path.clone(), symbol: name })
    }

    /// The batch arena: `lab_arena` up to the end of the segment that holds it.
    ///
    /// # Errors
    /// When `lab_arena` is missing or lies in no segment.
    pub fn arena(&self) -> Result<Arena, ImageError> {
        let sym = self.require("lab_arena")?;
        let seg_end = self
            .segments
            .iter()
            .find(|s| s.vaddr <= sym.addr && sym.addr < s.vaddr + s.memsz)
            .map(|s| s.vaddr + s.memsz)
            .ok_or(ImageError::MissingSymbol { path: self.path.clone(), symbol: "lab_arena" })?;
        let size = if sym.size > 0 { sym.size.min(seg_end - sym.addr) } else { seg_end - sym.addr };
        Ok(Arena { addr: sym.addr, size, kernel_data: self.kernel_data(sym.addr) })
    }

    /// The pages of the writable segment below [`KERNEL_DATA_END`] (and below `arena`), leaving
    /// out a first page shared with a non-writable segment; `None` without the mark or data.
    fn kernel_data(&self, arena: u64) -> Option<(u64, u64)> {
        const PAGE: u64 = crate::protocol::PAGE;
        let end = self.symbol(KERNEL_DATA_END)?.addr.min(arena) / PAGE * PAGE;
        let seg = self.segments.iter().find(|s| s.perms.write && s.vaddr < end && end <= s.vaddr + s.memsz)?;
        let mut start = seg.vaddr / PAGE * PAGE;
        let shared = |page: u64| {
            self.segments.iter().any(|o| !o.perms.write && o.vaddr < page + PAGE && page < o.vaddr + o.memsz)
        };
        if shared(start) {
            start += PAGE;
        }
        (start < end).then_some((start, end))
    }

    /// Where a data address lies in the image, for a finding: the writable section and the
    /// nearest symbol at or below it inside that section, e.g. `.bss at my_global+8`.
    pub fn locate_data(&self, addr: u64) -> Option<String> {
        let (section, start, _) = self.data_sections.iter().find(|(_, a, n)| *a <= addr && addr < a + n.max(&1))?;
        let sym = self
            .symbols
            .iter()
            .filter(|(_, s)| *start <= s.addr && s.addr <= addr && !self.is_code(s.addr))
            .max_by_key(|(_, s)| s.addr);
        Some(match sym {
            Some((name, s)) if s.addr == addr => format!("{section} at {name}"),
            Some((name, s)) => format!("{section} at {name}+{}", addr - s.addr),
            None => format!("{section}+{:#x}", addr - start),
        })
    }

    /// `addr` as `symbol+offset` (`md5_implCompress+0x1c`), only when it lies inside a code
    /// symbol: within its `st_size` bytes, or, for a symbol without a size, at or above it in the
    /// same executable segment with no other symbol in between. Any other address is printed
    /// raw with where it is (`0x71034183a0d377b4 (outside the image)`), never as a huge offset
    /// from the last symbol.
    pub fn symbolize(&self, addr: u64) -> String {
        match self.symbol_containing(addr) {
            Some((name, s)) if addr == s.addr => name.to_string(),
            Some((name, s)) => format!("{name}+{:#x}", addr - s.addr),
            None if self.is_code(addr) => match self.fell_off(addr) {
                Some((name, 0)) => format!("{addr:#x} (fell off the end of `{name}`: the byte just past it)"),
                Some((name, past)) => {
                    format!("{addr:#x} (fell off the end of `{name}`: {} byte{} past it)", past + 1, plural(past + 1))
                }
                None => format!("{addr:#x} (in the image's code, outside every symbol)"),
            },
            None if self.segment_of(addr).is_some() => format!("{addr:#x} (in the image's data)"),
            None => format!("{addr:#x} (outside the image)"),
        }
    }

    /// The sized code symbol that ends at most [`FELL_OFF_REACH`] bytes below `addr`, with no
    /// other symbol in between, and how far past its last byte `addr` lies (0: the byte just
    /// after it). A captured HotSpot stub that runs out of its bytes lands here.
    fn fell_off(&self, addr: u64) -> Option<(&str, u64)> {
        let (name, s) = self
            .symbols
            .iter()
            .filter(|(n, s)| s.addr <= addr && n.as_str() != KERNEL_TEXT_END && self.is_code(s.addr))
            .max_by_key(|(_, s)| s.addr)?;
        let end = s.addr + s.size;
        (s.size > 0 && end <= addr && addr - end < FELL_OFF_REACH).then(|| (name.as_str(), addr - end))
    }

    /// The code symbol `addr` lies in (see [`Image::symbolize`]), with its name.
    pub fn symbol_containing(&self, addr: u64) -> Option<(&str, Symbol)> {
        let seg = self.segment_of(addr).filter(|s| s.perms.exec)?;
        // The kernel-code mark shares its address with the driver's first function: never a name.
        let below =
            self.symbols.iter().filter(|(n, s)| s.addr <= addr && s.addr >= seg.vaddr && n.as_str() != KERNEL_TEXT_END);
        // Sized symbols cover their bytes; several may start below (labels inside functions).
        let sized = below.clone().filter(|(_, s)| s.size > 0 && addr < s.addr + s.size).max_by_key(|(_, s)| s.addr);
        let nearest = below.max_by_key(|(_, s)| s.addr);
        let (name, s) = match (sized, nearest) {
            (Some(hit), _) => hit,
            // An unsized symbol counts only when no sized symbol ends between it and `addr`.
            (None, Some((name, s))) if s.size == 0 => {
                let ends_between =
                    self.symbols.values().any(|t| t.size > 0 && t.addr >= s.addr && t.addr + t.size <= addr);
                if ends_between {
                    return None;
                }
                (name, s)
            }
            _ => return None,
        };
        Some((name.as_str(), *s))
    }

    fn segment_of(&self, addr: u64) -> Option<&Segment> {
        self.segments.iter().find(|s| s.vaddr <= addr && addr < s.vaddr + s.memsz)
    }

    /// `[start, end)` of the kernels' code: from the start of the executable segment holding
    /// [`KERNEL_TEXT_END`] up to it (every `.text` input of the kernels, helpers and local
    /// functions included, nothing of the driver); `None` when the image has no such mark.
    pub fn kernel_code(&self) -> Option<(u64, u64)> {
        let end = self.symbol(KERNEL_TEXT_END)?.addr;
        let seg = self.segments.iter().find(|s| s.perms.exec && s.vaddr <= end && end <= s.vaddr + s.memsz)?;
        Some((seg.vaddr, end))
    }

    /// Whether `addr` lies in an executable segment of the image.
    pub fn is_code(&self, addr: u64) -> bool {
        self.segment_of(addr).is_some_and(|s| s.perms.exec)
    }

    /// Names of every symbol the image defines, in name order.
    pub fn symbol_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.symbols.keys().map(String::as_str)
    }

    /// Every instruction of the image, decoded with every extension the disassembler knows
    /// ([`Listing::wide`]); computed once, cached on disk next to the image.
    ///
    /// # Errors
    /// `llvm-objdump` missing (naming the Debian package `llvm`) or failing.
    pub fn listing(&self) -> Result<&Listing, DisasmError> {
        if let Some(l) = self.listing.get() {
            return Ok(l);
        }
        let l = Listing::wide(&self.path, self.arch)?;
        Ok(self.listing.get_or_init(|| l))
    }

    /// The instruction at `addr` as text (`lbu t1, 0(t0)`), when the disassembly has one there.
    pub fn instruction_at(&self, addr: u64) -> Option<String> {
        self.listing().ok()?.at(addr).map(|i| i.text.clone())
    }

    /// The `len` bytes of the image's file contents at guest address `addr`, for disassembly.
    pub fn bytes_at(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let seg = self.segments.iter().find(|s| s.vaddr <= addr && addr < s.vaddr + s.data.len() as u64)?;
        let start = (addr - seg.vaddr) as usize;
        seg.data.get(start..(start + len).min(seg.data.len()))
    }
}
