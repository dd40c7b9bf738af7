//! The kernel manifest `kernel-lab.toml` (README "Bring your own kernel"): one `[[variant]]`
//! table per build of the user's kernel.
//!
//! ```toml
//! [[variant]]
//! name = "my-rv64-zbb"          # report name, also a cache folder name
//! arch = "riscv64"              # riscv64 | aarch64 | x86_64
//! isa = "rv64gc_zbb"            # what the code may use (default: the arch's base ISA)
//! sources = ["poly1305.S"]      # assembled by the lab with -march from `isa`
//! objects = ["build/md5.o", "build/libk.a"]   # prebuilt ELF objects / static archives
//! abi_upper_bits = "warn"       # fail | warn: int arguments' upper 32 bits (default: per family)
//! partial_loads = "fail"        # optional: `warn` (default) or `fail` (crate::vocab::policy::PartialLoads)
//! poly1305_acc = "jdk"          # optional: `lab` (default) or `jdk` (crate::domain::AccRange)
//! [variant.symbols]             # contract symbol = your symbol
//! md5_implCompress = "my_md5"
//! md5_implCompressMB = "my_md5_mb"
//! ```
//!
//! Paths are relative to the manifest's folder. Unknown keys, a bad ISA string, an unknown
//! contract, a missing file: a [`ManifestError`] naming the file, the entry and what is wrong.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{contract_symbols, valid_name, valid_symbol, DeclaredIsa, UserKernel};
use crate::variant::Arch;

/// The file name the lab looks for in a kernels folder (`--kernels-dir DIR`).
pub const FILE_NAME: &str = "kernel-lab.toml";

/// What is wrong with a manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {}{what}", file.display(), entry.as_ref().map(|e| format!("{e}: ")).unwrap_or_default())]
pub struct ManifestError {
    /// The manifest.
    pub file: PathBuf,
    /// The entry (`variant `my-rv` (entry 1)`) or key path (`variant[0].symbols`), if known.
    pub entry: Option<String>,
    /// What is wrong.
    pub what: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    variant: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    arch: String,
    isa: Option<String>,
    #[serde(default)]
    sources: Vec<PathBuf>,
    #[serde(default)]
    objects: Vec<PathBuf>,
    #[serde(default)]
    symbols: BTreeMap<String, String>,
    /// `fail` or `warn` ([`crate::abi::UpperBits`]); default: the contract family's.
    abi_upper_bits: Option<crate::abi::UpperBits>,
    /// `warn` or `fail`: partial loads of this variant ([`crate::vocab::policy::PartialLoads`]).
    partial_loads: Option<String>,
    /// `lab` or `jdk`: the HotSpot Poly1305 accumulator range ([`crate::domain::AccRange`]).
    poly1305_acc: Option<crate::domain::AccRange>,
}

/// Most bytes a manifest may have (a few hundred per variant; 1 MiB is thousands of them).
const MAX_BYTES: u64 = 1 << 20;

/// Reads the manifest at `path` into one [`UserKernel`] per `[[variant]]`.
///
/// # Errors
/// The first problem found, naming the file, the entry and what is wrong.
pub fn load(path: &Path) -> Result<Vec<UserKernel>, ManifestError> {
    let file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let fail = |entry: Option<String>, what: String| ManifestError { file: file.clone(), entry, what };
    let text = crate::input_file::read_regular(&file, MAX_BYTES, "a manifest")
        .map_err(|e| fail(None, format!("cannot read the manifest: {e}")))?;
    let de = toml::Deserializer::parse(&text).map_err(|e| fail(None, e.to_string()))?;
    let parsed: File = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        fail((path != ".").then_some(path), e.into_inner().to_string().trim_end().to_string())
    })?;
    if parsed.variant.is_empty() {
        return Err(fail(None, "no [[variant]] table".into()));
    }
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut out: Vec<UserKernel> = Vec::new();
    for (i, e) in parsed.variant.into_iter().enumerate() {
        let label = format!("variant `{}` (entry {})", e.name, i + 1);
        let kernel = entry(e, &dir, &file, &label).map_err(|what| fail(Some(label.clone()), what))?;
        if out.iter().any(|k| k.name == kernel.name) {
            return Err(fail(Some(label), "a second variant of this name (names must be unique)".into()));
        }
        out.push(kernel);
    }
    Ok(out)
}

fn entry(e: Entry, dir: &Path, file: &Path, label: &str) -> Result<UserKernel, String> {
    if !valid_name(&e.name) {
        return Err("`name` may hold only letters, digits and . _ + @ - (at most 64, not starting with .)".into());
    }
    let arch = Arch::from_name(&e.arch).ok_or_else(|| {
        let known: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
        format!("`arch = \"{}\"` is not one of {}", e.arch, known.join(", "))
    })?;
    let isa_text = e.isa.unwrap_or_else(|| DeclaredIsa::default_text(arch).to_string());
    let isa = DeclaredIsa::parse(&isa_text, arch).map_err(|err| format!("`isa`: {err}"))?;
    if e.sources.is_empty() && e.objects.is_empty() {
        return Err("neither `sources` nor `objects`: nothing to build".into());
    }
    let sources = existing(dir, "sources", e.sources)?;
    let objects = existing(dir, "objects", e.objects)?;
    let symbols = symbol_map(e.symbols).map_err(|w| format!("`symbols`: {w}"))?;
    let partial_loads = e
        .partial_loads
        .as_deref()
        .map(crate::vocab::policy::PartialLoads::from_name)
        .transpose()
        .map_err(|w| format!("`partial_loads`: {w}"))?;
    Ok(UserKernel {
        name: e.name.clone(),
        origin: format!("{}, {label}", file.display()),
        defines: super::defined_by(&objects, &sources, arch),
        isa,
        sources,
        objects,
        symbols,
        replay: vec![("--manifest".into(), file.display().to_string()), ("--variant".into(), format!("={}", e.name))],
        abi_upper_bits: e.abi_upper_bits,
        dispatch_path: None,
        scan_isa: None,
        not_run: None,
        partial_loads,
        poly1305_acc: e.poly1305_acc,
    })
}

/// `paths` made absolute against `dir`, each an existing file.
fn existing(dir: &Path, key: &str, paths: Vec<PathBuf>) -> Result<Vec<PathBuf>, String> {
    paths
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let abs = dir.join(&p);
            match abs.is_file() {
                true => Ok(abs),
                false => Err(format!("`{key}[{i}]`: {} does not exist or is not a file", abs.display())),
            }
        })
        .collect()
}

/// Checks a contract-symbol map: keys are contract symbols, values ELF symbol names.
///
/// # Errors
/// The unknown contract (with the closest known one) or the bad symbol name.
pub fn symbol_map(map: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> {
    let contracts = contract_symbols();
    for (k, v) in &map {
        if !contracts.iter().any(|(c, _)| c == k) {
            let near = contracts
                .iter()
                .map(|(c, _)| (strsim::levenshtein(c, k), *c))
                .min()
                .filter(|(d, _)| *d <= 4)
                .map(|(_, c)| format!(" (did you mean `{c}`?)"))
                .unwrap_or_default();
            let known: Vec<&str> = contracts.iter().map(|(c, _)| *c).collect();
            return Err(format!("`{k}` is not a contract symbol{near}; known: {}", known.join(", ")));
        }
        if !valid_symbol(v) {
            return Err(format!("`{k} = \"{v}\"`: not a symbol name (letters, digits, _ . $)"));
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join(FILE_NAME);
        std::fs::write(&p, text).unwrap();
        std::fs::write(dir.join("k.o"), b"").unwrap();
        p
    }

    #[test]
    fn an_entry_becomes_a_user_kernel_with_absolute_paths() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "[[variant]]\nname = \"mine\"\narch = \"riscv64\"\nisa = \"rv64gc_zbb\"\nobjects = [\"k.o\"]\n\
             [variant.symbols]\nmd5_implCompressMB = \"my_mb\"\n",
        );
        let k = load(&p).unwrap();
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].objects, vec![d.path().join("k.o")]);
        assert_eq!(k[0].isa.march, "rv64gc_zbb");
        assert_eq!(k[0].aliases(), vec![("md5_implCompressMB".to_string(), "my_mb".to_string())]);
        assert!(k[0].provides(crate::variant::Kernel::Md5) && !k[0].provides(crate::variant::Kernel::Poly1305));
    }

    #[test]
    fn errors_name_the_file_the_entry_and_what_is_wrong() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            ("[[variant]]\nname = \"a\"\narch = \"riscv64\"\nobjects = [\"k.o\"]\nflavour = 1\n", "unknown field `flavour`"),
            ("[[variant]]\nname = \"a\"\narch = \"riscv64\"\nisa = \"rv64gc_zbx\"\nobjects = [\"k.o\"]\n", "unknown riscv64 extension `zbx`"),
            ("[[variant]]\nname = \"a\"\narch = \"riscv64\"\nobjects = [\"nope.o\"]\n", "`objects[0]`"),
            ("[[variant]]\nname = \"a\"\narch = \"mips\"\nobjects = [\"k.o\"]\n", "`arch = \"mips\"`"),
            (
                "[[variant]]\nname = \"a\"\narch = \"x86_64\"\nobjects = [\"k.o\"]\n[variant.symbols]\nmd5_implCompresMB = \"f\"\n",
                "did you mean `md5_implCompressMB`",
            ),
            ("[[variant]]\nname = \"../a\"\narch = \"x86_64\"\nobjects = [\"k.o\"]\n", "`name` may hold only"),
        ];
        for (text, want) in cases {
            let p = write(d.path(), text);
            let e = load(&p).unwrap_err().to_string();
            assert!(e.starts_with(&p.display().to_string()) && e.contains(want), "{e}");
        }
        let p = write(d.path(), "[[variant]]\nname = \"a\"\narch = \"x86_64\"\nobjects = [\"k.o\"]\nflavour = 1\n");
        let e = load(&p).unwrap_err();
        assert_eq!(e.entry.as_deref(), Some("variant[0].flavour"), "{e}");
        let p =
            write(d.path(), "[[variant]]\nname = \"a\"\narch = \"x86_64\"\nisa = \"x86-64-v9\"\nobjects = [\"k.o\"]\n");
        assert!(load(&p).unwrap_err().to_string().contains("variant `a` (entry 1): `isa`"));
    }
}
