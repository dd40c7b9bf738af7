//! A declared ISA string (`rv64gc_zbb_zbkb`, `armv8-a+crypto`, `x86-64-v3+adx`) parsed into
//! rows of one table ([`EXTENSIONS`]): each row says what the extension means for clang, for the
//! static scan (`llvm-objdump --mattr`, or iced-x86 CPUID features on x86_64), for the qemu-user
//! `-cpu` string, for Unicorn and for the host CPU. A new extension is one row, not code.
//!
//! Backend facts come from docs/DESIGN.md "Backend facts" (Unicorn 2.1.5 = QEMU 5.0.1: no Zb*/Zk*
//! decoding, Cortex-A72 model, Haswell model without ADX/SHA and with wrong VEX results; qemu
//! 7.2 TCG: no AVX-512, no SHA-NI) and from probing qemu 7.2 on this machine kind.

use iced_x86::CpuidFeature as F;

use crate::variant::Arch;

/// What Unicorn 2.1.5 makes of an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnicornSupport {
    /// Its CPU model decodes it.
    Yes,
    /// The lab emulates it (`backend/zbb.rs`: Zbb).
    EmulatedZbb,
    /// Not available; the reason is reported when a row is skipped.
    No(&'static str),
}

/// One ISA extension of one architecture.
#[derive(Debug, Clone, Copy)]
pub struct Extension {
    /// Architecture it belongs to.
    pub arch: Arch,
    /// Its token in an ISA string (`zbb`, `crypto`, `avx2`), lower case.
    pub name: &'static str,
    /// `llvm-objdump --mattr` features (LLVM 14 names) that decode it; empty on x86_64.
    pub mattr: &'static str,
    /// x86_64: the iced-x86 CPUID features of its instructions (the scan's allow-list).
    pub cpuid: &'static [F],
    /// Extra clang flag for sources (x86_64 `-madx`); riscv64/aarch64 take the ISA string as
    /// `-march`.
    pub clang_flag: &'static str,
    /// qemu-user `-cpu` property turning it on (`zbkb=true`, `+avx2`); empty when the CPU model
    /// chosen for the ISA has it ([`aarch64_qemu_model`]).
    pub qemu_property: &'static str,
    /// Why qemu 7.2 cannot provide it, if it cannot.
    pub qemu_lacks: Option<&'static str>,
    /// Unicorn 2.1.5's support.
    pub unicorn: UnicornSupport,
    /// The flag `/proc/cpuinfo` lists when the host CPU has it (`native` backend).
    pub cpuinfo: &'static str,
}

const NO_ZB: UnicornSupport = UnicornSupport::No(
    "Unicorn 2.1.5 (QEMU 5.0.1 core) decodes no RISC-V Zb*/Zk* instructions and the lab emulates only Zbb",
);
const NO_A72: UnicornSupport =
    UnicornSupport::No("Unicorn 2.1.5 runs the Cortex-A72 model (ARMv8.0-A with AES, SHA-1/SHA-256, PMULL, CRC32)");
const NO_VEX: UnicornSupport = UnicornSupport::No(
    "Unicorn 2.1.5 computes VEX-encoded instructions wrongly (vpaddd, bzhi) or not at all (256-bit AVX): docs/DESIGN.md",
);
const NO_HASWELL: UnicornSupport = UnicornSupport::No("Unicorn 2.1.5's Haswell model lacks it");
const QEMU_NO_AVX512: Option<&str> = Some("qemu 7.2's TCG has no AVX-512");

/// A riscv64 row: `zbb` -> `+zbb`, `zbb=true`.
const fn rv(name: &'static str, mattr: &'static str, qemu: &'static str, unicorn: UnicornSupport) -> Extension {
    Extension {
        arch: Arch::Riscv64,
        name,
        mattr,
        cpuid: &[],
        clang_flag: "",
        qemu_property: qemu,
        qemu_lacks: None,
        unicorn,
        cpuinfo: name,
    }
}

/// An aarch64 row (qemu: the model decides, [`aarch64_qemu_model`]).
const fn a64(name: &'static str, mattr: &'static str, on_a72: bool, cpuinfo: &'static str) -> Extension {
    Extension {
        arch: Arch::Aarch64,
        name,
        mattr,
        cpuid: &[],
        clang_flag: "",
        qemu_property: "",
        qemu_lacks: None,
        unicorn: if on_a72 { UnicornSupport::Yes } else { NO_A72 },
        cpuinfo,
    }
}

/// An x86_64 row.
const fn x86(
    name: &'static str,
    cpuid: &'static [F],
    clang_flag: &'static str,
    qemu: &'static str,
    qemu_lacks: Option<&'static str>,
    unicorn: UnicornSupport,
    cpuinfo: &'static str,
) -> Extension {
    Extension {
        arch: Arch::X86_64,
        name,
        mattr: "",
        cpuid,
        clang_flag,
        qemu_property: qemu,
        qemu_lacks,
        unicorn,
        cpuinfo,
    }
}

/// Every extension an ISA string may name.
pub const EXTENSIONS: &[Extension] = &[
    // RISC-V single-letter extensions (the base string `rv64imafdc`, `g` = imafd).
    rv("m", "+m", "m=true", UnicornSupport::Yes),
    rv("a", "+a", "a=true", UnicornSupport::Yes),
    rv("f", "+f", "f=true", UnicornSupport::Yes),
    rv("d", "+d", "d=true", UnicornSupport::Yes),
    rv("c", "+c", "c=true", UnicornSupport::Yes),
    // RISC-V bit manipulation and scalar crypto (ratified; LLVM 14 and qemu 7.2 know them).
    rv("zba", "+zba", "zba=true", NO_ZB),
    rv("zbb", "+zbb", "zbb=true", UnicornSupport::EmulatedZbb),
    rv("zbc", "+zbc", "zbc=true", NO_ZB),
    rv("zbs", "+zbs", "zbs=true", NO_ZB),
    rv("zbkb", "+zbkb", "zbkb=true", NO_ZB),
    rv("zbkc", "+zbkc", "zbkc=true", NO_ZB),
    rv("zbkx", "+zbkx", "zbkx=true", NO_ZB),
    rv("zknd", "+zknd", "zknd=true", NO_ZB),
    rv("zkne", "+zkne", "zkne=true", NO_ZB),
    rv("zknh", "+zknh", "zknh=true", NO_ZB),
    rv("zksed", "+zksed", "zksed=true", NO_ZB),
    rv("zksh", "+zksh", "zksh=true", NO_ZB),
    // AArch64 features (`+name` after the architecture version).
    a64("crypto", "+aes,+sha2", true, "aes"),
    a64("aes", "+aes", true, "aes"),
    a64("sha2", "+sha2", true, "sha2"),
    a64("crc", "+crc", true, "crc32"),
    a64("sha3", "+sha3", false, "sha3"),
    a64("sm4", "+sm4", false, "sm4"),
    a64("lse", "+lse", false, "atomics"),
    a64("rdm", "+rdm", false, "asimdrdm"),
    a64("dotprod", "+dotprod", false, "asimddp"),
    a64("fp16", "+fullfp16", false, "fphp"),
    a64("rcpc", "+rcpc", false, "lrcpc"),
    // x86-64 features (`+name` after the micro-architecture level, x86-64 psABI).
    x86("cx16", &[F::CMPXCHG16B], "-mcx16", "+cx16", None, UnicornSupport::Yes, "cx16"),
    x86("popcnt", &[F::POPCNT], "-mpopcnt", "+popcnt", None, UnicornSupport::Yes, "popcnt"),
    x86("sse3", &[F::SSE3], "-msse3", "+sse3", None, UnicornSupport::Yes, "pni"),
    x86("ssse3", &[F::SSSE3], "-mssse3", "+ssse3", None, UnicornSupport::Yes, "ssse3"),
    x86("sse4.1", &[F::SSE4_1], "-msse4.1", "+sse4.1", None, UnicornSupport::Yes, "sse4_1"),
    x86("sse4.2", &[F::SSE4_2], "-msse4.2", "+sse4.2", None, UnicornSupport::Yes, "sse4_2"),
    x86("aes", &[F::AES], "-maes", "+aes", None, UnicornSupport::Yes, "aes"),
    x86("pclmul", &[F::PCLMULQDQ], "-mpclmul", "+pclmulqdq", None, UnicornSupport::Yes, "pclmulqdq"),
    x86("movbe", &[F::MOVBE], "-mmovbe", "+movbe", None, UnicornSupport::Yes, "movbe"),
    x86("xsave", &[F::XSAVE], "-mxsave", "+xsave", None, UnicornSupport::Yes, "xsave"),
    x86("lzcnt", &[F::LZCNT], "-mlzcnt", "+abm", None, UnicornSupport::Yes, "abm"),
    x86("adx", &[F::ADX], "-madx", "+adx", None, NO_HASWELL, "adx"),
    x86("sha", &[F::SHA], "-msha", "+sha-ni", Some("qemu 7.2's TCG has no SHA-NI"), NO_HASWELL, "sha_ni"),
    x86("bmi1", &[F::BMI1], "-mbmi", "+bmi1", None, NO_VEX, "bmi1"),
    x86("bmi2", &[F::BMI2], "-mbmi2", "+bmi2", None, NO_VEX, "bmi2"),
    x86("avx", &[F::AVX], "-mavx", "+avx", None, NO_VEX, "avx"),
    x86("avx2", &[F::AVX, F::AVX2], "-mavx2", "+avx2", None, NO_VEX, "avx2"),
    x86("fma", &[F::FMA], "-mfma", "+fma", None, NO_VEX, "fma"),
    x86("f16c", &[F::F16C], "-mf16c", "+f16c", None, NO_VEX, "f16c"),
    x86("vaes", &[F::VAES], "-mvaes", "+vaes", None, NO_VEX, "vaes"),
    x86("vpclmulqdq", &[F::VPCLMULQDQ], "-mvpclmulqdq", "+vpclmulqdq", None, NO_VEX, "vpclmulqdq"),
    x86("avx512f", &[F::AVX512F], "-mavx512f", "+avx512f", QEMU_NO_AVX512, NO_VEX, "avx512f"),
    x86("avx512bw", &[F::AVX512BW], "-mavx512bw", "+avx512bw", QEMU_NO_AVX512, NO_VEX, "avx512bw"),
    x86("avx512cd", &[F::AVX512CD], "-mavx512cd", "+avx512cd", QEMU_NO_AVX512, NO_VEX, "avx512cd"),
    x86("avx512dq", &[F::AVX512DQ], "-mavx512dq", "+avx512dq", QEMU_NO_AVX512, NO_VEX, "avx512dq"),
    x86("avx512vl", &[F::AVX512VL], "-mavx512vl", "+avx512vl", QEMU_NO_AVX512, NO_VEX, "avx512vl"),
];

/// A named bundle of extensions: an x86-64 micro-architecture level (x86-64 psABI, "Micro
/// Architecture Levels") or an Arm architecture version.
#[derive(Debug, Clone, Copy)]
pub struct Level {
    /// Architecture.
    pub arch: Arch,
    /// The level's name as written first in an ISA string (`x86-64-v3`, `armv8.2-a`).
    pub name: &'static str,
    /// Extensions it implies ([`EXTENSIONS`] names).
    pub implies: &'static [&'static str],
    /// Extra `--mattr` for the version (`+v8.2a`).
    pub mattr: &'static str,
}

const V2: &[&str] = &["cx16", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2"];
const V3: &[&str] = &[
    "cx16", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt",
    "movbe", "xsave",
];
const V4: &[&str] = &[
    "cx16", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt",
    "movbe", "xsave", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl",
];

/// Every level an ISA string may start with (riscv64 strings start with `rv64` instead).
pub const LEVELS: &[Level] = &[
    Level { arch: Arch::X86_64, name: "x86-64", implies: &[], mattr: "" },
    Level { arch: Arch::X86_64, name: "x86-64-v2", implies: V2, mattr: "" },
    Level { arch: Arch::X86_64, name: "x86-64-v3", implies: V3, mattr: "" },
    Level { arch: Arch::X86_64, name: "x86-64-v4", implies: V4, mattr: "" },
    Level { arch: Arch::Aarch64, name: "armv8-a", implies: &[], mattr: "" },
    Level { arch: Arch::Aarch64, name: "armv8.1-a", implies: &["crc", "lse", "rdm"], mattr: "+v8.1a" },
    Level { arch: Arch::Aarch64, name: "armv8.2-a", implies: &["crc", "lse", "rdm"], mattr: "+v8.2a" },
    Level { arch: Arch::Aarch64, name: "armv8.3-a", implies: &["crc", "lse", "rdm", "rcpc"], mattr: "+v8.3a" },
    Level {
        arch: Arch::Aarch64,
        name: "armv8.4-a",
        implies: &["crc", "lse", "rdm", "rcpc", "dotprod"],
        mattr: "+v8.4a",
    },
    Level {
        arch: Arch::Aarch64,
        name: "armv8.5-a",
        implies: &["crc", "lse", "rdm", "rcpc", "dotprod"],
        mattr: "+v8.5a",
    },
];

/// The `--mattr` every aarch64 scan starts from (FP and Advanced SIMD are part of ARMv8-A as
/// Linux runs it).
const AARCH64_BASE_MATTR: &str = "+fp-armv8,+neon";

/// A parsed ISA string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredIsa {
    /// The string as written.
    pub text: String,
    /// Its architecture.
    pub arch: Arch,
    /// clang `-march` value.
    pub march: String,
    /// Extra clang flags (x86_64 `-m<feature>`).
    pub clang_flags: Vec<String>,
    /// `llvm-objdump --mattr` that decodes exactly this ISA (riscv64, aarch64).
    pub mattr: String,
    /// qemu-user `-cpu` argument.
    pub qemu_cpu: String,
    /// Extensions named or implied, as rows of [`EXTENSIONS`] (by name).
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

fn row(arch: Arch, name: &str) -> Option<&'static Extension> {
    EXTENSIONS.iter().find(|e| e.arch == arch && e.name == name)
}

fn known(arch: Arch) -> String {
    EXTENSIONS.iter().filter(|e| e.arch == arch).map(|e| e.name).collect::<Vec<_>>().join(", ")
}

impl DeclaredIsa {
    /// Parses `text` for `arch`: `rv64<imafdcg letters>[_ext...]` on riscv64 (e.g.
    /// `rv64gc_zbb_zbkb`), `<armv8[.N]-a>[+ext...]` on aarch64 (`armv8-a+crypto`),
    /// `<x86-64[-vN]>[+ext...]` on x86_64 (`x86-64-v3+adx`).
    ///
    /// # Errors
    /// An [`IsaError`] naming the string, the part that is wrong and what is known.
    pub fn parse(text: &str, arch: Arch) -> Result<DeclaredIsa, IsaError> {
        let err = |why: String| IsaError { text: text.to_string(), why };
        let lower = text.trim().to_ascii_lowercase();
        match arch {
            Arch::Riscv64 => Self::riscv(text, &lower).map_err(err),
            Arch::Aarch64 | Arch::X86_64 => Self::levelled(text, &lower, arch).map_err(err),
        }
    }

    /// The lab's default ISA string for `arch` (what its own kernels may use).
    pub fn default_text(arch: Arch) -> &'static str {
        match arch {
            Arch::Riscv64 => "rv64gc",
            Arch::Aarch64 => "armv8-a",
            Arch::X86_64 => "x86-64",
        }
    }

    fn riscv(text: &str, lower: &str) -> Result<DeclaredIsa, String> {
        let mut parts = lower.split('_');
        let base = parts.next().unwrap_or_default();
        let letters = base
            .strip_prefix("rv64")
            .ok_or_else(|| format!("a riscv64 ISA string starts with `rv64` (e.g. `rv64gc_zbb`), not `{base}`"))?;
        let mut single: Vec<&'static str> = Vec::new();
        let mut has_i = false;
        for c in letters.chars() {
            match c {
                'i' => has_i = true,
                'g' => {
                    has_i = true;
                    single.extend(["m", "a", "f", "d"]);
                }
                _ => single.push(
                    row(Arch::Riscv64, &c.to_string())
                        .filter(|e| e.name.len() == 1)
                        .ok_or_else(|| format!("unknown single-letter extension `{c}` (known: i, m, a, f, d, c, g)"))?
                        .name,
                ),
            }
        }
        if !has_i {
            return Err(format!("`{base}` lacks the base integer ISA (`i`, or `g` = imafd)"));
        }
        let mut multi: Vec<&'static str> = Vec::new();
        for p in parts {
            let e = row(Arch::Riscv64, p)
                .filter(|e| e.name.len() > 1)
                .ok_or_else(|| format!("unknown extension `{p}` (known: {})", known(Arch::Riscv64)))?;
            multi.push(e.name);
        }
        let order = ["m", "a", "f", "d", "c"];
        let has = |l: &str| single.contains(&l);
        let mut march = String::from("rv64");
        if ["m", "a", "f", "d"].iter().all(|l| has(l)) {
            march.push('g');
            march.push_str(if has("c") { "c" } else { "" });
        } else {
            march.push('i');
            order.iter().filter(|l| has(l)).for_each(|l| march.push_str(l));
        }
        multi.sort_by_key(|n| EXTENSIONS.iter().position(|e| e.name == *n));
        multi.dedup();
        for m in &multi {
            march.push('_');
            march.push_str(m);
        }
        let mut extensions: Vec<&'static str> = order.into_iter().filter(|l| has(l)).collect();
        extensions.extend(&multi);
        // qemu 7.2's `rv64` turns Zba/Zbb/Zbc/Zbs and the IMAFDC letters on by default: every
        // default-on extension is named, on or off, so the CPU has exactly the declared ISA.
        let mut qemu = vec!["rv64".to_string()];
        for l in order.iter().chain(&["zba", "zbb", "zbc", "zbs"]) {
            qemu.push(format!("{l}={}", extensions.contains(l)));
        }
        qemu.extend(
            multi
                .iter()
                .filter(|m| !["zba", "zbb", "zbc", "zbs"].contains(m))
                .filter_map(|m| row(Arch::Riscv64, m))
                .map(|e| e.qemu_property.to_string()),
        );
        let mattr = extensions.iter().filter_map(|n| row(Arch::Riscv64, n)).map(|e| e.mattr).collect::<Vec<_>>();
        Ok(DeclaredIsa {
            text: text.trim().to_string(),
            arch: Arch::Riscv64,
            march,
            clang_flags: Vec::new(),
            mattr: mattr.join(","),
            qemu_cpu: qemu.join(","),
            extensions,
        })
    }

    fn levelled(text: &str, lower: &str, arch: Arch) -> Result<DeclaredIsa, String> {
        let mut parts = lower.split('+');
        let first = parts.next().unwrap_or_default();
        let levels = || LEVELS.iter().filter(|l| l.arch == arch).map(|l| l.name).collect::<Vec<_>>().join(", ");
        let level = LEVELS
            .iter()
            .find(|l| l.arch == arch && l.name == first)
            .ok_or_else(|| format!("`{first}` is not a {arch} level (known: {})", levels()))?;
        let mut extensions: Vec<&'static str> = level.implies.to_vec();
        let mut named = Vec::new();
        for p in parts {
            let e = row(arch, p).ok_or_else(|| format!("unknown {arch} extension `{p}` (known: {})", known(arch)))?;
            named.push(e.name);
            extensions.push(e.name);
        }
        extensions.sort_by_key(|n| EXTENSIONS.iter().position(|e| e.name == *n && e.arch == arch));
        extensions.dedup();
        let rows: Vec<&'static Extension> = extensions.iter().filter_map(|n| row(arch, n)).collect();
        let (march, clang_flags, mattr, qemu_cpu) = match arch {
            Arch::Aarch64 => {
                let mut mattr = vec![AARCH64_BASE_MATTR];
                mattr.extend(Some(level.mattr).filter(|m| !m.is_empty()));
                mattr.extend(rows.iter().map(|e| e.mattr));
                (lower.to_string(), Vec::new(), mattr.join(","), aarch64_qemu_model(level, &rows).to_string())
            }
            _ => {
                let flags = named.iter().filter_map(|n| row(arch, n)).map(|e| e.clang_flag.to_string()).collect();
                let mut cpu = vec!["qemu64".to_string()];
                cpu.extend(rows.iter().map(|e| e.qemu_property.to_string()));
                (level.name.to_string(), flags, String::new(), cpu.join(","))
            }
        };
        Ok(DeclaredIsa { text: text.trim().to_string(), arch, march, clang_flags, mattr, qemu_cpu, extensions })
    }

    /// The rows of [`EXTENSIONS`] this ISA names or implies.
    pub fn rows(&self) -> impl Iterator<Item = &'static Extension> + '_ {
        self.extensions.iter().filter_map(|n| row(self.arch, n))
    }

    /// Whether the ISA includes Zbb (the Unicorn backend then emulates it).
    pub fn zbb(&self) -> bool {
        self.arch == Arch::Riscv64 && self.extensions.contains(&"zbb")
    }

    /// x86_64: the CPUID features the declared extensions allow beyond baseline x86-64.
    pub fn x86_cpuid(&self) -> Vec<F> {
        self.rows().flat_map(|e| e.cpuid.iter().copied()).collect()
    }

    /// Why Unicorn cannot run code for this ISA, naming the extensions, if it cannot.
    pub fn unicorn_lacks(&self) -> Option<String> {
        lacks(self.rows().filter_map(|e| match e.unicorn {
            UnicornSupport::No(why) => Some((e.name, why)),
            _ => None,
        }))
    }

    /// Why qemu 7.2 cannot provide this ISA, if it cannot.
    pub fn qemu_lacks(&self) -> Option<String> {
        lacks(self.rows().filter_map(|e| e.qemu_lacks.map(|why| (e.name, why))))
    }

    /// Why this host's CPU cannot run code for this ISA (extensions missing from the flags of
    /// `/proc/cpuinfo`, given as `host_flags`), if it cannot.
    pub fn host_lacks(&self, host_flags: &[String]) -> Option<String> {
        let missing: Vec<&str> =
            self.rows().filter(|e| !host_flags.iter().any(|f| f == e.cpuinfo)).map(|e| e.name).collect();
        (!missing.is_empty()).then(|| format!("this host's CPU lacks {} (/proc/cpuinfo)", missing.join(", ")))
    }
}

/// aarch64 qemu-user model: Cortex-A72 (the lab's default) when the ISA is ARMv8.0-A with at
/// most the A72's extras, else `max`.
fn aarch64_qemu_model(level: &Level, rows: &[&'static Extension]) -> &'static str {
    if level.mattr.is_empty() && rows.iter().all(|e| e.unicorn == UnicornSupport::Yes) {
        "cortex-a72"
    } else {
        "max"
    }
}

/// "Unicorn cannot provide zbkb, zknh: <reason>", grouping extensions by reason.
fn lacks(items: impl Iterator<Item = (&'static str, &'static str)>) -> Option<String> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, why) in items {
        match groups.iter_mut().find(|(w, _)| *w == why) {
            Some((_, names)) => names.push(name),
            None => groups.push((why, vec![name])),
        }
    }
    let parts: Vec<String> = groups.iter().map(|(why, names)| format!("{} ({why})", names.join(", "))).collect();
    (!parts.is_empty()).then(|| format!("cannot provide {}", parts.join("; ")))
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

    #[test]
    fn riscv_strings_map_to_march_mattr_and_an_exact_qemu_cpu() {
        let isa = DeclaredIsa::parse("rv64gc_zbkb_zbb", Arch::Riscv64).unwrap();
        assert_eq!(isa.march, "rv64gc_zbb_zbkb");
        assert_eq!(isa.mattr, "+m,+a,+f,+d,+c,+zbb,+zbkb");
        assert_eq!(
            isa.qemu_cpu,
            "rv64,m=true,a=true,f=true,d=true,c=true,zba=false,zbb=true,zbc=false,zbs=false,zbkb=true"
        );
        assert!(isa.zbb());
        let u = isa.unicorn_lacks().unwrap();
        assert!(u.contains("zbkb") && !u.contains("zbb,"), "{u}");
        let plain = DeclaredIsa::parse("rv64imac", Arch::Riscv64).unwrap();
        assert_eq!((plain.march.as_str(), plain.mattr.as_str()), ("rv64imac", "+m,+a,+c"));
        assert!(plain.qemu_cpu.contains("f=false,d=false") && plain.unicorn_lacks().is_none());
    }

    #[test]
    fn bad_strings_name_the_part_and_what_is_known() {
        let e = DeclaredIsa::parse("rv64gc_zbq", Arch::Riscv64).unwrap_err().to_string();
        assert!(e.contains("`rv64gc_zbq`") && e.contains("unknown extension `zbq`") && e.contains("zbkb"), "{e}");
        let e = DeclaredIsa::parse("rv32gc", Arch::Riscv64).unwrap_err().to_string();
        assert!(e.contains("starts with `rv64`"), "{e}");
        let e = DeclaredIsa::parse("armv9-a", Arch::Aarch64).unwrap_err().to_string();
        assert!(e.contains("armv8.1-a"), "{e}");
        let e = DeclaredIsa::parse("x86-64-v3+avx3", Arch::X86_64).unwrap_err().to_string();
        assert!(e.contains("`avx3`"), "{e}");
    }

    #[test]
    fn x86_levels_and_aarch64_features_decide_backends() {
        let v3 = DeclaredIsa::parse("x86-64-v3+adx", Arch::X86_64).unwrap();
        assert!(v3.x86_cpuid().contains(&F::AVX2) && v3.x86_cpuid().contains(&F::ADX));
        assert!(
            v3.qemu_cpu.starts_with("qemu64,+cx16") && v3.qemu_cpu.contains("+avx2") && v3.qemu_cpu.contains("+adx")
        );
        assert!(v3.unicorn_lacks().unwrap().contains("avx2") && v3.qemu_lacks().is_none());
        assert_eq!(v3.clang_flags, vec!["-madx"]);
        assert!(DeclaredIsa::parse("x86-64-v4", Arch::X86_64).unwrap().qemu_lacks().unwrap().contains("AVX-512"));
        assert_eq!(
            v3.host_lacks(&["avx2".into()]).unwrap(),
            format!(
                "this host's CPU lacks {} (/proc/cpuinfo)",
                v3.extensions.iter().filter(|n| **n != "avx2").copied().collect::<Vec<_>>().join(", ")
            )
        );
        let a = DeclaredIsa::parse("armv8-a+crypto", Arch::Aarch64).unwrap();
        assert_eq!((a.mattr.as_str(), a.qemu_cpu.as_str()), ("+fp-armv8,+neon,+aes,+sha2", "cortex-a72"));
        assert!(a.unicorn_lacks().is_none());
        let s = DeclaredIsa::parse("armv8.2-a+sha3", Arch::Aarch64).unwrap();
        assert_eq!(s.qemu_cpu, "max");
        assert!(s.unicorn_lacks().unwrap().contains("sha3"));
    }
}
