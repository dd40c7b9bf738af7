//! A declared ISA string (`rv64gc_zbb_zbkb`, `armv8-a+crypto`, `x86-64-v3+adx`) parsed into the
//! arch row's extension rows ([`crate::arch::IsaSpec`]): each row says what the extension means
//! for the static scan (`--mattr` or CPUID features), for qemu's `-cpu`, for Unicorn and for the
//! host CPU. A new extension is a row in `lab/src/arch/<arch>.rs`, not code here.

use crate::arch::{Arch, IsaExtension, IsaSpec};

/// A parsed ISA string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredIsa {
    /// The string as written.
    pub text: String,
    /// Its architecture.
    pub arch: Arch,
    /// clang `-march` value.
    pub march: String,
    /// Extra clang flags (`-m<extension>` where `-march` does not take extensions).
    pub clang_flags: Vec<String>,
    /// `llvm-objdump --mattr` that decodes exactly this ISA.
    pub mattr: String,
    /// qemu-user `-cpu` argument.
    pub qemu_cpu: String,
    /// Extensions named or implied: names of the arch row's extensions, in row order.
    pub extensions: Vec<&'static str>,
}

/// Why an ISA string cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ISA string `{text}`: {why}")]
pub struct IsaError {
    /// The string.
    pub text: String,
    /// What is wrong, with what is known.
    pub why: String,
}

fn known(isa: &IsaSpec) -> String {
    isa.extensions.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}

impl DeclaredIsa {
    /// Parses `text` for `arch`: the arch's base ISA or one of its levels (`rv64gc`, `armv8-a`,
    /// `x86-64`, `x86-64-v3`), then extensions joined by `_` or `+` (`rv64gc_zbb_zbkb`,
    /// `armv8-a+crypto`, `x86-64-v3+adx`). The base stays the lab's: its driver saves the
    /// registers of the full base ISA (riscv64: the F/D registers).
    ///
    /// # Errors
    /// An [`IsaError`] naming the string, the part that is wrong and what is known.
    pub fn parse(text: &str, arch: Arch) -> Result<DeclaredIsa, IsaError> {
        let err = |why: String| IsaError { text: text.to_string(), why };
        let isa = &arch.spec().isa;
        let lower = text.trim().to_ascii_lowercase();
        let mut parts = lower.split(['_', '+']);
        let first = parts.next().unwrap_or_default();
        let mut on: Vec<&'static IsaExtension> = Vec::new();
        let mut named = Vec::new();
        // Single-letter extensions may follow the base directly (`rv64gcv`: RISC-V unprivileged
        // ISA, "ISA Extension Naming Conventions").
        let letters = isa.extensions.iter().any(|e| e.name.len() == 1);
        let glued = first.strip_prefix(isa.base).filter(|rest| letters && !rest.is_empty());
        if let Some(rest) = glued {
            for letter in rest.split_inclusive(|_| true) {
                let e = isa.extension(letter).filter(|e| e.name.len() == 1).ok_or_else(|| {
                    err(format!("unknown {arch} extension `{letter}` after `{}` (known: {})", isa.base, known(isa)))
                })?;
                named.push(e);
                on.push(e);
            }
        }
        let first = if glued.is_some() { isa.base } else { first };
        if first != isa.base {
            let level = isa.levels.iter().find(|l| l.name == first).ok_or_else(|| {
                let levels: Vec<&str> = std::iter::once(isa.base).chain(isa.levels.iter().map(|l| l.name)).collect();
                err(format!("starts with `{first}`; a {arch} ISA string starts with {}", levels.join(" or ")))
            })?;
            on.extend(level.implies.iter().filter_map(|n| isa.extension(n)));
        }
        for p in parts {
            let e = isa
                .extension(p)
                .ok_or_else(|| err(format!("unknown {arch} extension `{p}` (known: {})", known(isa))))?;
            named.push(e);
            on.push(e);
        }
        let order = |e: &&IsaExtension| isa.extensions.iter().position(|x| x.name == e.name);
        on.sort_by_key(order);
        on.dedup_by_key(|e| e.name);
        named.sort_by_key(order);
        named.dedup_by_key(|e| e.name);
        let (march, clang_flags) = match isa.march_separator {
            Some(sep) => {
                // Single-letter extensions come first, glued to the base (clang refuses
                // `rv64gc_zbb_v`), then the others with the separator.
                let letters: String = named.iter().filter(|e| e.name.len() == 1).map(|e| e.name).collect();
                let exts: String =
                    named.iter().filter(|e| e.name.len() > 1).map(|e| format!("{sep}{}", e.name)).collect();
                (format!("{first}{letters}{exts}"), Vec::new())
            }
            None => (first.to_string(), named.iter().map(|e| crate::arch::clang_flag(e.name)).collect()),
        };
        Ok(DeclaredIsa {
            text: text.trim().to_string(),
            arch,
            march,
            clang_flags,
            mattr: isa.mattr(&on),
            qemu_cpu: isa.qemu_cpu(&on),
            extensions: on.iter().map(|e| e.name).collect(),
        })
    }

    /// The lab's default ISA string for `arch` (the arch row's base).
    pub fn default_text(arch: Arch) -> &'static str {
        arch.spec().isa.base
    }

    /// The arch rows of the extensions this ISA names or implies.
    pub fn rows(&self) -> impl Iterator<Item = &'static IsaExtension> + '_ {
        let isa = &self.arch.spec().isa;
        self.extensions.iter().filter_map(|n| isa.extension(n))
    }

    /// Whether the ISA includes Zbb (the Unicorn backend then emulates it).
    pub fn zbb(&self) -> bool {
        self.extensions.contains(&"zbb")
    }

    /// Why Unicorn cannot run code for this ISA, naming the extensions, if it cannot.
    pub fn unicorn_lacks(&self) -> Option<String> {
        self.arch.spec().isa.unicorn_lacks(&self.rows().collect::<Vec<_>>())
    }

    /// Why qemu 7.2 cannot provide this ISA, if it cannot.
    pub fn qemu_lacks(&self) -> Option<String> {
        self.arch.spec().isa.qemu_lacks(&self.rows().collect::<Vec<_>>())
    }

    /// Why this host's CPU cannot run code for this ISA (extensions missing from the flags of
    /// `/proc/cpuinfo`, given as `host_flags`, under Linux's names), if it cannot.
    pub fn host_lacks(&self, host_flags: &[String]) -> Option<String> {
        self.arch.spec().isa.host_lacks(&self.rows().collect::<Vec<_>>(), host_flags)
    }
}

/// The CPU flags of this host (`flags` or `Features` line of `/proc/cpuinfo`); empty when it
/// cannot be read.
pub fn host_cpu_flags() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("flags") || l.starts_with("Features"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, arch: &str) -> Result<DeclaredIsa, IsaError> {
        DeclaredIsa::parse(text, Arch::from_name(arch).unwrap())
    }

    #[test]
    fn riscv_strings_map_to_march_mattr_and_an_exact_qemu_cpu() {
        let isa = parse("rv64gc_zbkb_zbb", "riscv64").unwrap();
        assert_eq!(isa.march, "rv64gc_zbb_zbkb");
        assert_eq!(isa.mattr, "+m,+a,+f,+d,+c,+zbb,+zbkb");
        assert_eq!(isa.qemu_cpu, "rv64,zba=false,zbb=true,zbc=false,zbs=false,zbkb=true");
        assert!(isa.zbb());
        let u = isa.unicorn_lacks().unwrap();
        assert!(u.contains("zbkb") && !u.contains("zbb,"), "{u}");
        assert!(parse("rv64gc", "riscv64").unwrap().unicorn_lacks().is_none());
    }

    /// RVV as users write it: glued to the base or after `_`, before or after Zbb; `-march` in
    /// the form clang accepts (single letters glued to the base).
    #[test]
    fn rvv_strings_parse_in_every_spelling() {
        for text in ["rv64gcv", "rv64gc_v", "RV64GCV"] {
            let isa = parse(text, "riscv64").unwrap();
            assert_eq!((isa.march.as_str(), isa.extensions.clone()), ("rv64gcv", vec!["v"]), "{text}");
            assert_eq!(isa.mattr, "+m,+a,+f,+d,+c,+v");
            assert_eq!(isa.qemu_cpu, "rv64,zba=false,zbb=false,zbc=false,zbs=false,v=true,vext_spec=v1.0,elen=64");
            assert!(isa.unicorn_lacks().unwrap().contains("v (Unicorn 2.1.5 (QEMU 5.0.1) has no RVV 1.0)"));
            assert!(isa.qemu_lacks().is_none());
        }
        for text in ["rv64gcv_zbb", "rv64gc_zbb_v", "rv64gc_v_zbb"] {
            let isa = parse(text, "riscv64").unwrap();
            assert_eq!((isa.march.as_str(), isa.extensions.clone()), ("rv64gcv_zbb", vec!["zbb", "v"]), "{text}");
            assert_eq!(isa.qemu_cpu, "rv64,zba=false,zbb=true,zbc=false,zbs=false,v=true,vext_spec=v1.0,elen=64");
        }
        let e = parse("rv64gcq", "riscv64").unwrap_err().to_string();
        assert!(e.contains("unknown riscv64 extension `q` after `rv64gc`"), "{e}");
        let e = parse("rv64gczbb", "riscv64").unwrap_err().to_string();
        assert!(e.contains("extension `z` after `rv64gc`"), "{e}");
    }

    #[test]
    fn bad_strings_name_the_part_and_what_is_known() {
        let e = parse("rv64gc_zbq", "riscv64").unwrap_err().to_string();
        assert!(
            e.contains("`rv64gc_zbq`") && e.contains("unknown riscv64 extension `zbq`") && e.contains("zbkb"),
            "{e}"
        );
        let e = parse("rv32gc", "riscv64").unwrap_err().to_string();
        assert!(e.contains("starts with rv64gc"), "{e}");
        let e = parse("x86-64-v3+avx3", "x86_64").unwrap_err().to_string();
        assert!(e.contains("`avx3`"), "{e}");
    }

    #[test]
    fn x86_levels_and_aarch64_features_decide_backends() {
        let v3 = parse("x86-64-v3+adx", "x86_64").unwrap();
        assert_eq!((v3.march.as_str(), v3.clang_flags.clone()), ("x86-64-v3", vec!["-madx".to_string()]));
        assert!(v3.extensions.contains(&"avx2") && v3.extensions.contains(&"adx"));
        assert!(
            v3.qemu_cpu.starts_with("qemu64,") && v3.qemu_cpu.contains("avx2=true") && v3.qemu_cpu.contains("adx=true")
        );
        assert!(v3.unicorn_lacks().unwrap().contains("avx2") && v3.qemu_lacks().is_none());
        assert!(parse("x86-64-v4", "x86_64").unwrap().qemu_lacks().unwrap().contains("AVX-512"));
        let lacks = v3.host_lacks(&["avx2".into()]).unwrap();
        assert!(lacks.contains("adx") && !lacks.contains("avx2,"), "{lacks}");
        let a = parse("armv8-a+crypto", "aarch64").unwrap();
        assert_eq!((a.march.as_str(), a.qemu_cpu.as_str()), ("armv8-a+crypto", "cortex-a72"));
        assert!(a.mattr.starts_with("+fp-armv8,+neon,") && a.unicorn_lacks().is_none());
        assert!(parse("armv8-a+sha3", "aarch64").unwrap().unicorn_lacks().unwrap().contains("sha3"));
    }
}
