//! Bring your own kernel: a user's sources, prebuilt objects and static archives, with their
//! own symbol names and a declared ISA, as a [`Variant`] the whole lab runs like its own.
//!
//! A [`UserKernel`] comes from a manifest entry ([`manifest`]) or from the `--object`,
//! `--symbol`, `--isa` options; [`UserKernel::into_variant`] makes it a `&'static Variant` (made
//! once per process and never freed, like the lab's own rows) whose `-march`, scan `--mattr`
//! and qemu `-cpu` come from the declared ISA ([`isa_decl`]). The lab's driver is always linked
//! (`toolchain.rs`); each mapped contract symbol becomes a lab-private alias of the user's name
//! (`--defsym lab_entry_<contract>=<user's symbol>`, [`crate::image::ENTRY_PREFIX`]) that the
//! lab calls, so the objects' own symbols, a library's `poly1305_blocks` that a wrapper calls
//! included, stay what they are. Objects that export a library's name for a contract
//! (`ossl_md5_block_asm_data_order`, [`crate::contract::EXPORTED_NAMES`]) are mapped without
//! `--symbol`.

pub mod attributes;
pub mod capability;
pub mod glue_paths;
pub mod isa_decl;
pub mod manifest;
pub mod objects;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::variant::{Arch, Custom, Kernel, Variant};
use crate::vocab::backend_kind::BackendKind;

pub use isa_decl::DeclaredIsa;

/// A kernel the user brings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserKernel {
    /// Variant name in reports (`[A-Za-z0-9._+@-]`, also a cache folder name).
    pub name: String,
    /// Where it was declared, for messages (`kernel-lab.toml, variant `my-rv``).
    pub origin: String,
    /// The ISA the code may use.
    pub isa: DeclaredIsa,
    /// Assembly sources (`.S`, `.s`), absolute.
    pub sources: Vec<PathBuf>,
    /// Relocatable ELF objects and `ar` archives, absolute.
    pub objects: Vec<PathBuf>,
    /// Contract symbol (`md5_implCompressMB`) to the user's symbol (`my_md5_mb`); empty: the
    /// code uses the contract names themselves.
    pub symbols: BTreeMap<String, String>,
    /// The options that select this kernel again (`--manifest FILE --variant NAME`, or
    /// `--object ... --symbol ... --isa ... --arch ...`), for replay lines: (option, value).
    pub replay: Vec<(String, String)>,
    /// The global symbols `objects` define ([`defined_by`]); `None` when there are sources
    /// (known only once assembled) or an object could not be read (the build says why).
    pub defines: Option<BTreeSet<String>>,
    /// The manifest's `abi_upper_bits`, if it chooses one ([`crate::abi::UpperBits`]).
    pub abi_upper_bits: Option<crate::abi::UpperBits>,
    /// The OpenSSL dispatch path this variant runs (`avx2`), when its objects choose one
    /// through a capability word ([`capability`]).
    pub dispatch_path: Option<&'static str>,
    /// The ISA the static scan allows when it is more than [`UserKernel::isa`]: the image
    /// holds the code of every dispatch path, the variant runs one of them.
    pub scan_isa: Option<DeclaredIsa>,
    /// Why no backend runs this variant (a dispatch path whose code the objects lack).
    pub not_run: Option<String>,
    /// The manifest's `partial_loads` for this variant (`warn`, `fail`), overriding
    /// `--partial-loads` ([`crate::vocab::policy::PartialLoads`]).
    pub partial_loads: Option<crate::vocab::policy::PartialLoads>,
    /// The manifest's `poly1305_acc`: the accumulators a HotSpot-family Poly1305 kernel is
    /// handed and returns ([`crate::domain::AccRange`]); `None`: the lab's contract range.
    pub poly1305_acc: Option<crate::domain::AccRange>,
}

/// The global symbols `objects` (objects and archive members) define for `arch`, or `None`
/// when `sources` is not empty or an object cannot be read.
pub fn defined_by(objects: &[PathBuf], sources: &[PathBuf], arch: Arch) -> Option<BTreeSet<String>> {
    if !sources.is_empty() {
        return None;
    }
    let mut out = BTreeSet::new();
    for o in objects {
        let (units, _) = objects::read(o, arch).ok()?;
        out.extend(units.into_iter().flat_map(|u| u.defined).map(|(name, _)| name));
    }
    Some(out)
}

/// Every contract symbol a kernel may provide (every family, [`crate::contract::CONTRACTS`]),
/// with its kernel.
pub fn contract_symbols() -> Vec<(&'static str, Kernel)> {
    crate::contract::CONTRACTS.iter().map(|c| (c.symbol, c.kernel)).collect()
}

/// The contract symbols of `kernel` (every family).
pub fn symbols_of(kernel: Kernel) -> Vec<&'static str> {
    contract_symbols().into_iter().filter(|(_, k)| *k == kernel).map(|(s, _)| s).collect()
}

/// Whether `name` can be a variant name: also a folder name of the image cache.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._+@-".contains(c))
}

/// Whether `name` can be an ELF symbol given to ld.lld's `--defsym`.
pub fn valid_symbol(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.$".contains(c))
}

impl UserKernel {
    /// The kernel's architecture.
    pub fn arch(&self) -> Arch {
        self.isa.arch
    }

    /// Whether it provides `kernel`: the kernels with a mapped symbol; when no symbol is mapped
    /// (contract names are used as they are), the kernels one of whose contract names the
    /// objects define, or nearly (a misspelt name runs, and the missing symbol fails the run
    /// naming the near one); an OpenSSL MD5 object brings no Poly1305, which is skipped, saying
    /// so, as an unmapped kernel is. Every kernel when the objects are not known before the build.
    pub fn provides(&self, kernel: Kernel) -> bool {
        if !self.symbols.is_empty() {
            return symbols_of(kernel).iter().any(|s| self.symbols.contains_key(*s));
        }
        let near = |d: &String, s: &str| strsim::levenshtein(d, s) <= 3 || d.eq_ignore_ascii_case(s);
        let exported = self.exported().iter().any(|(c, _)| symbols_of(kernel).contains(&c.as_str()));
        exported
            || self.defines.as_ref().is_none_or(|d| symbols_of(kernel).iter().any(|s| d.iter().any(|n| near(n, s))))
    }

    /// (contract symbol, library's exported name) for each contract the objects implement under
    /// a known exported name ([`crate::contract::exported_name`]) and that no `--symbol` maps.
    pub fn exported(&self) -> Vec<(String, String)> {
        let Some(defines) = &self.defines else { return Vec::new() };
        let defined = |s: &str| defines.contains(s);
        crate::contract::CONTRACTS
            .iter()
            .filter(|c| !self.symbols.contains_key(c.symbol))
            .filter_map(|c| crate::contract::exported_name(c.symbol, defined).map(|e| (c.symbol.into(), e.into())))
            .collect()
    }

    /// Why it does not provide `kernel`, if it does not ([`UserKernel::provides`]).
    pub fn lacks(&self, kernel: Kernel) -> Option<String> {
        if self.provides(kernel) {
            return None;
        }
        let list = symbols_of(kernel).join(", ");
        Some(if self.symbols.is_empty() {
            let objects: Vec<String> = self.objects.iter().map(|o| o.display().to_string()).collect();
            let known = self.defines.as_ref().and_then(|d| crate::contract::not_a_contract(kernel, d.iter()));
            format!(
                "{} define{} no {kernel} contract symbol ({list}){}; name yours with --symbol \
                 CONTRACT=SYMBOL (a manifest: [variant.symbols])",
                objects.join(", "),
                if objects.len() == 1 { "s" } else { "" },
                known.map_or_else(String::new, |w| format!(": {w}"))
            )
        } else {
            format!("{}: no {kernel} contract symbol is mapped ({list})", self.origin)
        })
    }

    /// The lab's entry aliases (contract symbol, user's symbol) for names that differ: mapped by
    /// `--symbol` or a manifest, or found as a library's exported name ([`UserKernel::exported`]).
    pub fn aliases(&self) -> Vec<(String, String)> {
        self.wanted().into_iter().filter(|(c, u)| c != u).collect()
    }

    /// Every symbol the linked objects must define: the user's name for each mapped contract
    /// and each exported name found, (contract, user's name).
    pub fn wanted(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self.symbols.iter().map(|(c, u)| (c.clone(), u.clone())).collect();
        out.extend(self.exported());
        out
    }

    /// Why `backend` cannot run code for the declared ISA, if it cannot: reported as the
    /// reason its rows are skipped (never counted as passed). Never Unicorn's ISA: it runs each
    /// call up to an instruction it cannot execute.
    pub fn backend_lacks(&self, backend: BackendKind) -> Option<String> {
        if let Some(why) = &self.not_run {
            return Some(why.clone());
        }
        let why = match backend {
            // Unicorn runs a user's object whatever it declares: a call stops at the first
            // instruction of an extension Unicorn lacks and is skipped, naming it
            // (`isa::unicorn_stops`); calls on scalar paths and short inputs still get a verdict.
            BackendKind::Unicorn => None,
            BackendKind::Qemu => self.isa.qemu_lacks(),
            BackendKind::Native => self.isa.host_lacks(&isa_decl::host_cpu_flags()),
        }?;
        Some(format!("{backend} {why}, which `{}` declares", self.isa.text))
    }

    /// Makes the kernel a variant for the rest of the lab. The variant and its strings live for
    /// the rest of the process (a handful per run), as the lab's own rows do.
    pub fn into_variant(self) -> &'static Variant {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let kernel: &'static UserKernel = Box::leak(Box::new(self));
        let handle = register(kernel);
        let arch = kernel.arch();
        // The image (built and scanned) holds every dispatch path's code; the backends get the
        // path's own ISA (qemu's -cpu, what Unicorn and the host must have).
        let image_isa = kernel.scan_isa.as_ref().unwrap_or(&kernel.isa);
        let extensions: &'static [&'static str] = Box::leak(image_isa.extensions.clone().into_boxed_slice());
        let isa = match kernel.dispatch_path {
            Some(p) => format!("the declared ISA {} (every dispatch path; this row runs {p})", image_isa.text),
            None => format!("the declared ISA {}", image_isa.text),
        };
        Box::leak(Box::new(Variant {
            name: leak(kernel.name.clone()),
            arch,
            zbb: kernel.isa.zbb(),
            extensions,
            march: leak(image_isa.march.clone()),
            qemu_cpu: leak(kernel.isa.qemu_cpu.clone()),
            isa: leak(isa),
            mattr: leak(image_isa.mattr.clone()),
            custom: Some(Custom(handle)),
        }))
    }
}

/// The user's kernel behind `variant`, if it is one.
pub fn of(variant: &Variant) -> Option<&'static UserKernel> {
    let registry = REGISTRY.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    variant.custom.and_then(|c| registry.get(c.0).copied())
}

/// The vector length `variant`'s code runs with (RVV's VLEN, SVE's VL), from the ISA qemu is
/// given: a user's dispatch path runs its own ISA ([`UserKernel::isa`]), not the image's every
/// path (an OpenSSL image with an SVE2 path runs its scalar path with no vector length);
/// the lab's own rows from their extensions ([`Variant::vector_length`]).
pub fn vector_length(variant: &Variant) -> Option<&'static crate::arch::VectorLengthSpec> {
    match of(variant) {
        Some(k) => variant.arch.spec().isa.vector_length_of(&k.isa.extensions),
        None => variant.vector_length(),
    }
}

/// Every user's kernel of this process, by its [`Custom`] handle (the index).
static REGISTRY: std::sync::RwLock<Vec<&'static UserKernel>> = std::sync::RwLock::new(Vec::new());

/// Registers `kernel` and returns its handle.
fn register(kernel: &'static UserKernel) -> usize {
    let mut registry = REGISTRY.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    registry.push(kernel);
    registry.len() - 1
}

/// A one-off kernel from the command line (`--object`, `--symbol`, `--isa`), named after
/// the first object's file stem (`my_md5`). `arch` comes from `--arch` or, without it, from the first
/// object's ELF machine.
///
/// # Errors
/// A missing object, an unknown contract or bad symbol, a bad ISA string, or objects whose
/// machine does not say the arch; each names the option and value.
pub fn from_options(
    objects: &[PathBuf],
    symbols: &[String],
    isa: Option<&str>,
    arch: Option<Arch>,
) -> Result<UserKernel, String> {
    let mut abs = Vec::new();
    for o in objects {
        let a = std::path::absolute(o).unwrap_or_else(|_| o.clone());
        if !a.is_file() {
            return Err(format!("--object {}: no such file", o.display()));
        }
        abs.push(a);
    }
    let first = abs.first().ok_or("--symbol and --isa need --object FILE")?;
    let arch = match arch {
        Some(a) => a,
        None => objects::arch_of(first).map_err(|e| format!("--object: {e} (name the architecture with --arch)"))?,
    };
    let mut map = BTreeMap::new();
    for s in symbols {
        let (c, u) = s
            .split_once('=')
            .ok_or_else(|| format!("--symbol {s}: write CONTRACT=SYMBOL, e.g. md5_implCompressMB=my_md5_mb"))?;
        if map.insert(c.trim().to_string(), u.trim().to_string()).is_some() {
            return Err(format!("--symbol {s}: {} is mapped twice", c.trim()));
        }
    }
    let symbols = manifest::symbol_map(map).map_err(|e| format!("--symbol: {e}"))?;
    let defines = defined_by(&abs, &[], arch);
    // Without --isa: the base, the extensions the objects declare in their own attributes
    // (`-march=rv64gcv`), and what a known exported name implies.
    let declared = attributes::declared_extensions(&abs, arch);
    let base = std::iter::once(DeclaredIsa::default_text(arch)).chain(declared).collect::<Vec<_>>().join("_");
    let isa_text = match (isa, &defines) {
        (Some(text), _) => text.to_owned(),
        (None, Some(d)) => crate::contract::implied_isa(&base, |s| d.contains(s), |c| symbols.contains_key(c)),
        (None, None) => base,
    };
    let isa = DeclaredIsa::parse(&isa_text, arch).map_err(|e| format!("--isa: {e}"))?;
    let stem = first.file_stem().unwrap_or_default().to_string_lossy();
    let mut name: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || "._+@-".contains(c) { c } else { '_' }).take(64).collect();
    if name.starts_with('.') {
        name.insert(0, '_');
    }
    let mut replay: Vec<(String, String)> = abs.iter().map(|o| ("--object".into(), o.display().to_string())).collect();
    replay.extend(symbols.iter().map(|(c, u)| ("--symbol".to_string(), format!("{c}={u}"))));
    replay.push(("--isa".into(), isa.text.clone()));
    replay.push(("--arch".into(), arch.name().into()));
    Ok(UserKernel {
        name,
        origin: "the --symbol options".into(),
        isa,
        sources: Vec::new(),
        defines,
        objects: abs,
        symbols,
        replay,
        abi_upper_bits: None,
        dispatch_path: None,
        scan_isa: None,
        not_run: None,
        partial_loads: None,
        poly1305_acc: None,
    })
}
