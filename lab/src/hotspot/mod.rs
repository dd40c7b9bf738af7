//! HotSpot's own stubs in the lab: captured from a JVM (`lab capture`, `--hotspot JAVA`), checked,
//! and written as a relocatable ELF object with each stub at its contract symbol, which the
//! lab links with its driver like any prebuilt kernel ([`crate::user_kernel`]).
//!
//! HotSpot generates its intrinsic stubs at start-up; developers never have a `.S` file. The
//! lab runs the given `java` with the user's flags and `-XX:+PrintStubCode` ([`jvm`]), takes
//! each stub's exact address range from that log ([`log`]) and its bytes from the live JVM's
//! memory (the log's hex drops a last group of fewer than 4 bytes on x86). A capture from a
//! saved log ([`from_log`]) refuses a stub the log printed short. Every stub is decoded
//! ([`check`]): cut-off code, branches outside the captured bytes and absolute addresses into
//! the code cache are refused, naming the stub; a RIP-relative read of a constant area takes
//! the log's block holding it along ([`DataBlock`], relocated in the object); the CPUID
//! features the code needs give the variant's declared ISA. The variant name carries the JDK version and the flags
//! ([`Capture::variant_name`]).
//!
//! Captures of x86_64 and aarch64 code: those arch rows have a check of captured code
//! ([`crate::arch::HotSpotSpec`]); a JVM of the other architecture runs under qemu-user
//! ([`jvm::launcher`], [`capturable_arches`]). riscv64 stubs are refused until the lab has a
//! check of RISC-V code (and Debian 12 has no riscv64 JDK).

pub mod check;
pub mod check_a64;
pub mod jvm;
pub mod log;
mod object_out;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::user_kernel::{DeclaredIsa, UserKernel};
use crate::variant::Arch;
use crate::variant::{MD5_IMPL_COMPRESS, MD5_IMPL_COMPRESS_MB, POLY1305_PROCESS_BLOCKS};

pub use object_out::MANIFEST_NOTE;

/// HotSpot stub names (as `-XX:+PrintStubCode` prints them after `StubRoutines::`) and the
/// contract symbol each becomes (docs/contracts.md, family `hotspot`).
pub const STUBS: &[(&str, &str)] = &[
    ("md5_implCompress", MD5_IMPL_COMPRESS),
    ("md5_implCompressMB", MD5_IMPL_COMPRESS_MB),
    ("poly1305_processBlocks", POLY1305_PROCESS_BLOCKS),
];

/// Why a capture failed or a stub was refused.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Running the JVM or reading its memory failed.
    #[error("{0}")]
    Jvm(String),
    /// A stub cannot be used as captured.
    #[error("stub `{stub}` refused: {why}")]
    Refused {
        /// HotSpot's stub name.
        stub: String,
        /// What is wrong.
        why: String,
    },
    /// The request cannot be served (unknown stub name, an architecture not captured yet, no
    /// stub at all).
    #[error("{0}")]
    Unsupported(String),
    /// Reading a log or writing the object or manifest failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// One captured stub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stub {
    /// HotSpot's name (`md5_implCompressMB`).
    pub hotspot: String,
    /// The contract symbol it becomes.
    pub contract: &'static str,
    /// Its address in the JVM's code cache.
    pub start: u64,
    /// Its exact bytes, `[start, start + len)`.
    pub bytes: Vec<u8>,
    /// Its RIP-relative reads of memory outside itself, each in one of [`Capture::data`].
    pub constants: Vec<check::ConstRef>,
}

/// A block of the code cache a stub reads (a constant area HotSpot printed as a stub of its
/// own, such as `StubRoutines::_ghash_poly_addr`), captured with the stubs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataBlock {
    /// HotSpot's name of the block.
    pub hotspot: String,
    /// Its address in the JVM's code cache.
    pub start: u64,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A capture: the stubs of one JVM run with one set of flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The architecture of the code.
    pub arch: Arch,
    /// `java.runtime.version` (`17.0.15+6-Debian-1deb12u1`), or `unknown` from a log.
    pub jdk: String,
    /// Where it came from: `/usr/bin/java`, or `log /tmp/stubs.log`.
    pub from: String,
    /// The JVM flags the user gave (the lab adds `-XX:+UnlockDiagnosticVMOptions
    /// -XX:+PrintStubCode`).
    pub flags: Vec<String>,
    /// The captured stubs, in address order.
    pub stubs: Vec<Stub>,
    /// The constant areas the stubs read, in address order.
    pub data: Vec<DataBlock>,
    /// The declared ISA of the code (`x86-64`, `x86-64+bmi2`).
    pub isa: String,
    /// Stubs of [`STUBS`] the JVM did not generate (a JDK without them, or flags turning them
    /// off such as `-XX:-UseMD5Intrinsics`).
    pub absent: Vec<&'static str>,
}

/// Which architectures `lab capture` can capture on this host, each with the reason when it
/// cannot: (arch, Ok(the `java` it would run) or Err(why not)). The host's JVM is `java` on
/// PATH; another architecture's is a Debian multiarch JDK ([`foreign_java`]) run under its
/// qemu-user.
pub fn capturable_arches() -> Vec<(Arch, Result<String, String>)> {
    let host = Arch::host();
    Arch::ALL
        .into_iter()
        .map(|a| {
            let row = &a.spec().hotspot;
            let r = if row.check.is_none() {
                Err(format!("the lab has no check of captured {a} code yet, so its stubs are refused ({})", row.jdk))
            } else if Some(a) == host {
                which::which("java")
                    .map(|p| p.display().to_string())
                    .map_err(|_| format!("no `java` on PATH ({})", row.jdk))
            } else if which::which(a.qemu_binary()).is_err() {
                Err(format!("needs {} to run a {a} JVM: install Debian's qemu-user", a.qemu_binary()))
            } else {
                foreign_java(a).map(|p| p.display().to_string()).ok_or_else(|| {
                    format!(
                        "no {a} JDK here: {} (run under {}; or name any {a} JDK's bin/java with --hotspot)",
                        row.jdk,
                        a.qemu_binary()
                    )
                })
            };
            (a, r)
        })
        .collect()
}

/// An installed JDK's `java` for `arch` from Debian's multiarch packages
/// (`/usr/lib/jvm/java-<N>-openjdk-<debian arch>/bin/java`, the highest N), if there is one.
pub fn foreign_java(arch: Arch) -> Option<PathBuf> {
    let suffix = format!("-openjdk-{}", arch.spec().hotspot.debian_arch);
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/jvm")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n: u32 = name.strip_prefix("java-")?.strip_suffix(&suffix)?.parse().ok()?;
            let java = e.path().join("bin/java");
            java.is_file().then_some((n, java))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}

/// The architecture whose JVM reports `os_arch` (`amd64`, `aarch64`, `riscv64`).
fn arch_of_os(os_arch: &str) -> Option<Arch> {
    Arch::ALL.into_iter().find(|a| a.spec().hotspot.os_arch.contains(&os_arch))
}

/// Checks the `--stub` names: each must be one of [`STUBS`]. Empty means all of them.
///
/// # Errors
/// An unknown name, with the known ones.
pub fn wanted_stubs(names: &[String]) -> Result<Vec<&'static str>, CaptureError> {
    if names.is_empty() {
        return Ok(STUBS.iter().map(|(h, _)| *h).collect());
    }
    let known: Vec<&str> = STUBS.iter().map(|(h, _)| *h).collect();
    names
        .iter()
        .map(|n| {
            known.iter().copied().find(|k| k == n).ok_or_else(|| {
                CaptureError::Unsupported(format!(
                    "stub `{n}` has no contract in the lab (known HotSpot stubs: {})",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// Captures the `wanted` stubs ([`wanted_stubs`]) from a live JVM: `java` run with `flags`.
///
/// # Errors
/// The JVM fails ([`CaptureError::Jvm`]), a stub is refused, an explicitly wanted stub is not
/// generated, or no stub is.
pub fn from_jvm(
    java: &Path,
    flags: &[String],
    wanted: &[&'static str],
    explicit: bool,
) -> Result<Capture, CaptureError> {
    let mut live = jvm::run(java, flags, wanted)?;
    let arch = arch_of_os(&live.os_arch).ok_or_else(|| {
        CaptureError::Unsupported(format!("the JVM runs on `{}`, not an architecture of the lab", live.os_arch))
    })?;
    let from = match &live.emulator {
        Some(qemu) => format!("{} under {qemu}", java.display()),
        None => java.display().to_string(),
    };
    let memory = live.memory.take();
    let read = |at: u64, len: usize| memory.as_ref().ok_or_else(|| "the JVM is gone".to_string())?.read(at, len);
    build(arch, live.version, from, flags, live.stubs, wanted, explicit, Some(&read))
}

/// Reads `len` bytes of a live JVM at an address (constants outside every printed block).
type ReadMemory<'a> = &'a dyn Fn(u64, usize) -> Result<Vec<u8>, String>;

/// Captures the `wanted` stubs from a saved `-XX:+PrintStubCode` log of an `arch` JVM. A stub
/// the log printed short of its range is refused (HotSpot's hex drops a last group of fewer
/// than 4 bytes on x86): capture it from a live JVM instead.
///
/// # Errors
/// The log cannot be read, a stub is refused (truncated), or none is there.
pub fn from_log(path: &Path, arch: Arch, wanted: &[&'static str], explicit: bool) -> Result<Capture, CaptureError> {
    let text = std::fs::read_to_string(path).map_err(|source| CaptureError::Io { path: path.to_path_buf(), source })?;
    let stubs = log::parse(&text);
    for s in stubs.iter().filter(|s| wanted.contains(&s.name.as_str())) {
        if (s.printed.len() as u64) < s.size() {
            return Err(CaptureError::Refused {
                stub: s.name.clone(),
                why: format!(
                    "the log prints {} of its {} bytes ([{:#x}, {:#x})): a truncated capture (without hsdis HotSpot \
                     prints x86 code in 4-byte groups and drops a last group of fewer than 4 bytes, or the log was cut); \
                     capture it from a live JVM: lab capture --java JAVA",
                    s.printed.len(),
                    s.size(),
                    s.start,
                    s.end
                ),
            });
        }
    }
    build(arch, "unknown".into(), format!("log {}", path.display()), &[], stubs, wanted, explicit, None)
}

#[allow(clippy::too_many_arguments)] // one call per source (live JVM, log): each names them all
fn build(
    arch: Arch,
    jdk: String,
    from: String,
    flags: &[String],
    printed: Vec<log::PrintedStub>,
    wanted: &[&'static str],
    explicit: bool,
    memory: Option<ReadMemory>,
) -> Result<Capture, CaptureError> {
    let check: check::StubCheck = match arch.spec().hotspot.check {
        Some(crate::arch::StubDecoder::IcedX86) => check::x86_stub,
        Some(crate::arch::StubDecoder::A64) => check_a64::a64_stub,
        None => {
            let why = format!("{arch} stubs are not captured yet: the lab has no check of {arch} code");
            return Err(CaptureError::Unsupported(why));
        }
    };
    let mut stubs = Vec::new();
    let mut absent = Vec::new();
    for &(hotspot, contract) in STUBS.iter().filter(|(h, _)| wanted.contains(h)) {
        match printed.iter().find(|p| p.name == hotspot) {
            Some(p) => {
                let bytes = p.printed.get(..usize::try_from(p.size()).unwrap_or(usize::MAX)).unwrap_or(&p.printed);
                let bytes = bytes.to_vec();
                stubs.push(Stub { hotspot: hotspot.into(), contract, start: p.start, bytes, constants: Vec::new() });
            }
            None if explicit => {
                return Err(CaptureError::Unsupported(format!(
                    "the JVM ({from}, {jdk}{}) generated no `{hotspot}` stub",
                    flags_note(flags)
                )))
            }
            None => absent.push(hotspot),
        }
    }
    if stubs.is_empty() {
        let names: Vec<&str> = wanted.to_vec();
        return Err(CaptureError::Unsupported(format!(
            "the JVM ({from}, {jdk}{}) generated none of {} (a JDK without these intrinsics, or flags that turn them off)",
            flags_note(flags),
            names.join(", ")
        )));
    }
    stubs.sort_by_key(|s| s.start);
    let mut extensions = Vec::new();
    let mut data: Vec<DataBlock> = Vec::new();
    for s in &mut stubs {
        let checked = check(&s.hotspot, s.start, &s.bytes)?;
        extensions.extend(checked.extensions);
        for c in &checked.constants {
            let block = data_block(&s.hotspot, c, &printed, memory)?;
            match data.iter_mut().find(|d| d.start == block.start) {
                Some(d) if d.bytes.len() < block.bytes.len() => *d = block,
                Some(_) => {}
                None => data.push(block),
            }
        }
        s.constants = checked.constants;
    }
    data.sort_by_key(|d| d.start);
    let isa = check::isa_string(arch, &extensions);
    Ok(Capture { arch, jdk, from, flags: flags.to_vec(), stubs, data, isa, absent })
}

/// The block of the log holding `c`'s target, whole, for stub `stub`; outside every printed
/// block (a static table of libjvm.so, as JDK 21+'s AVX-512 Poly1305 reads), the bytes the
/// instruction reads there, from the live JVM's `memory`.
///
/// # Errors
/// The target lies in no block the JVM printed and cannot be read (a log, or an address-only
/// `lea`), or in one whose bytes are short (a log).
fn data_block(
    stub: &str,
    c: &check::ConstRef,
    printed: &[log::PrintedStub],
    memory: Option<ReadMemory>,
) -> Result<DataBlock, CaptureError> {
    let refuse = |why: String| CaptureError::Refused { stub: stub.to_string(), why };
    let Some(p) = printed.iter().find(|p| p.start <= c.target && c.target < p.end) else {
        let (Some(read), 1..) = (memory, c.len) else {
            return Err(refuse(format!(
                "it {} RIP-relative memory at {:#x} (displacement at +{:#x}), which lies in no block the JVM printed: \
                 a constant area the lab cannot capture{}",
                if c.len == 0 { "takes the address of" } else { "reads" },
                c.target,
                c.disp_at,
                if c.len == 0 { " (its extent is unknown)" } else { " from a log" }
            )));
        };
        let bytes =
            read(c.target, c.len as usize).map_err(|e| refuse(format!("cannot read the constants it reads: {e}")))?;
        return Ok(DataBlock { hotspot: format!("constants@{:#x}", c.target), start: c.target, bytes });
    };
    if (p.printed.len() as u64) < p.size() {
        return Err(refuse(format!(
            "it reads constants in `{}` [{:#x}, {:#x}), whose bytes the log prints short ({} of {}): capture from a \
             live JVM",
            p.name,
            p.start,
            p.end,
            p.printed.len(),
            p.size()
        )));
    }
    let bytes = p.printed[..usize::try_from(p.size()).unwrap_or(0)].to_vec();
    Ok(DataBlock { hotspot: p.name.clone(), start: p.start, bytes })
}

fn flags_note(flags: &[String]) -> String {
    if flags.is_empty() {
        String::new()
    } else {
        format!(", flags {}", flags.join(" "))
    }
}

impl Capture {
    /// The report name: `hotspot-<JDK version>` (`hotspot-<arch>-<JDK version>` for another
    /// architecture than x86_64) and each flag (`-XX:` dropped, `=` as `.`), joined by `@`, e.g.
    /// `hotspot-17.0.15+6-Debian-1deb12u1@UseAVX.0`; kept to the 64
    /// characters a variant name may have by replacing the flags with a hash of them.
    pub fn variant_name(&self) -> String {
        let clean = |s: &str| -> String {
            s.chars().map(|c| if c.is_ascii_alphanumeric() || "._+-".contains(c) { c } else { '.' }).collect()
        };
        let base = format!("{}-{}", self.arch.spec().hotspot.variant_prefix, clean(&self.jdk));
        let flags: Vec<String> = self.flags.iter().map(|f| clean(f.trim_start_matches("-XX:"))).collect();
        let full = std::iter::once(base.clone()).chain(flags).collect::<Vec<_>>().join("@");
        if full.len() <= 64 {
            return full;
        }
        let hash = crate::fnv::fnv1a(self.flags.join("\n").as_bytes());
        let short = format!("{}@flags.{:08x}", base.chars().take(46).collect::<String>(), hash as u32);
        short
    }

    /// Writes `<variant>.o` and `kernel-lab.toml` (replacing one that is there) into `dir`
    /// and returns the manifest's path.
    ///
    /// # Errors
    /// The folder or a file cannot be written.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, CaptureError> {
        object_out::write(self, dir)
    }

    /// The capture as a kernel for the lab, its object written under `dir`; `replay` are the
    /// options that capture it again (`--hotspot JAVA`, `--jvm-flag F`).
    ///
    /// # Errors
    /// The object cannot be written.
    pub fn user_kernel(&self, dir: &Path, replay: Vec<(String, String)>) -> Result<UserKernel, CaptureError> {
        let object = object_out::write_object(self, dir)?;
        let isa = DeclaredIsa::parse(&self.isa, self.arch)
            .map_err(|e| CaptureError::Unsupported(format!("the captured code's ISA: {e}")))?;
        let symbols: BTreeMap<String, String> =
            self.stubs.iter().map(|s| (s.contract.to_string(), s.contract.to_string())).collect();
        Ok(UserKernel {
            name: self.variant_name(),
            origin: match self.absent.as_slice() {
                [] => self.describe(),
                absent => format!("{}, which generated no {} stub", self.describe(), absent.join(" or ")),
            },
            isa,
            sources: Vec::new(),
            defines: Some(symbols.keys().cloned().collect()),
            objects: vec![object],
            symbols,
            replay,
            abi_upper_bits: None,
            dispatch_path: None,
            scan_isa: None,
            not_run: None,
            partial_loads: None,
            // HotSpot's stubs are handed what the JDK's Java code leaves (measured on JDK 25's
            // x86_64 stub: it returns accumulators in that range too).
            poly1305_acc: Some(crate::domain::AccRange::Jdk),
        })
    }

    /// One line naming the capture: `HotSpot 17.0.15+6-Debian-1deb12u1 (/usr/bin/java, flags
    /// -XX:UseAVX=0)`.
    pub fn describe(&self) -> String {
        format!("HotSpot {} ({}{})", self.jdk, self.from, flags_note(&self.flags))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(flags: &[&str]) -> Capture {
        Capture {
            arch: Arch::X86_64,
            jdk: "17.0.15+6-Debian-1deb12u1".into(),
            from: "/usr/bin/java".into(),
            flags: flags.iter().map(|s| s.to_string()).collect(),
            stubs: Vec::new(),
            data: Vec::new(),
            isa: "x86-64".into(),
            absent: Vec::new(),
        }
    }

    #[test]
    fn variant_names_carry_the_jdk_and_the_flags() {
        assert_eq!(capture(&[]).variant_name(), "hotspot-17.0.15+6-Debian-1deb12u1");
        assert_eq!(
            capture(&["-XX:UseAVX=0", "-XX:-UseBMI2Instructions"]).variant_name(),
            "hotspot-17.0.15+6-Debian-1deb12u1@UseAVX.0@-UseBMI2Instructions"
        );
        let long = capture(&["-XX:UseAVX=0", "-XX:-UseBMI2Instructions", "-XX:+UseAPX", "-Xmx64m"]).variant_name();
        assert!(long.len() <= 64 && long.contains("@flags.") && crate::user_kernel::valid_name(&long), "{long}");
    }

    #[test]
    fn a_foreign_capture_names_its_architecture() {
        let c = Capture { arch: Arch::Aarch64, ..capture(&["-XX:-UseSIMDForMemoryOps"]) };
        assert_eq!(c.variant_name(), "hotspot-aarch64-17.0.15+6-Debian-1deb12u1@-UseSIMDForMemoryOps");
    }

    #[test]
    fn unknown_stub_names_are_refused() {
        let e = wanted_stubs(&["sha256_implCompress".into()]).unwrap_err().to_string();
        assert!(e.contains("`sha256_implCompress` has no contract") && e.contains("md5_implCompressMB"), "{e}");
        assert_eq!(wanted_stubs(&[]).unwrap().len(), STUBS.len());
    }

    /// A log with `md5_implCompress` at 0x1000: `movdqa xmm0, [rip + disp]; ret` (9 bytes),
    /// and a 16-byte constant block at 0x1100.
    fn log_with_constants(disp: u32) -> String {
        let d = disp.to_le_bytes();
        format!(
            "StubRoutines::md5_implCompress [0x0000000000001000, 0x0000000000001009] (9 bytes)\n[MachCode]\n  \
             0x0000000000001000: 660f 6f05 | {:02x}{:02x} {:02x}{:02x} | c3\n[/MachCode]\n\
             StubRoutines::_lab_mask_addr [0x0000000000001100, 0x0000000000001110] (16 bytes)\n[MachCode]\n  \
             0x0000000000001100: 0001 0203 | 0405 0607 | 0809 0a0b | 0c0d 0e0f\n[/MachCode]\n",
            d[0], d[1], d[2], d[3]
        )
    }

    #[test]
    fn a_constant_area_is_captured_and_relocated() {
        use object::{Object as _, ObjectSection as _};
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("stubs.log");
        // next instruction at 0x1008; 0x1108 - 0x1008 = 0x100: byte 8 of the constant block
        std::fs::write(&p, log_with_constants(0x100)).unwrap();
        let c = from_log(&p, Arch::X86_64, &wanted_stubs(&[]).unwrap(), false).unwrap();
        assert_eq!(c.data.len(), 1);
        assert_eq!(
            (c.data[0].hotspot.as_str(), c.data[0].start, c.data[0].bytes.len()),
            ("_lab_mask_addr", 0x1100, 16)
        );
        let bytes = object_out::object_bytes(&c).unwrap();
        let f = object::File::parse(&*bytes).unwrap();
        let rodata = f.section_by_name(".rodata").unwrap();
        assert_eq!(rodata.data().unwrap(), &c.data[0].bytes[..]);
        let text = f.section_by_name(".text").unwrap();
        let relocs: Vec<(u64, i64)> = text.relocations().map(|(at, r)| (at, r.addend())).collect();
        // At the displacement (+4): S + A - P with A = 8 - (8 - 4) reaches rodata + 8 from the
        // next instruction.
        assert_eq!(relocs, vec![(4, 4)]);
        // A read into no printed block is refused.
        std::fs::write(&p, log_with_constants(0x4000)).unwrap();
        let e = from_log(&p, Arch::X86_64, &wanted_stubs(&[]).unwrap(), false).unwrap_err().to_string();
        assert!(e.contains("reads RIP-relative memory at 0x5008") && e.contains("no block the JVM printed"), "{e}");
    }

    #[test]
    fn constants_outside_every_printed_block_are_read_from_the_live_jvm() {
        use object::{Object as _, ObjectSection as _};
        // movdqa xmm0, [rip + 0x4000] reads 16 bytes at 0x5008 (a static table, far away).
        let printed = log::parse(&log_with_constants(0x4000));
        let read = |at: u64, len: usize| -> Result<Vec<u8>, String> {
            assert_eq!((at, len), (0x5008, 16));
            Ok((0..16).map(|b| 0xa0 + b).collect())
        };
        let wanted = wanted_stubs(&[]).unwrap();
        let c =
            build(Arch::X86_64, "25".into(), "java".into(), &[], printed.clone(), &wanted, false, Some(&read)).unwrap();
        assert_eq!(c.data.len(), 1);
        assert_eq!((c.data[0].hotspot.as_str(), c.data[0].start), ("constants@0x5008", 0x5008));
        let bytes = object_out::object_bytes(&c).unwrap();
        let f = object::File::parse(&*bytes).unwrap();
        let rodata = f.section_by_name(".rodata").unwrap();
        assert_eq!(rodata.data().unwrap(), &c.data[0].bytes[..]);
        let relocs: Vec<(u64, i64)> =
            f.section_by_name(".text").unwrap().relocations().map(|(at, r)| (at, r.addend())).collect();
        assert_eq!(relocs, vec![(4, -4)], "the read reaches the first byte of its own copy");
        // Without a live JVM (a log) it is refused; an unreadable address names the error.
        assert!(build(Arch::X86_64, "25".into(), "log".into(), &[], printed.clone(), &wanted, false, None).is_err());
        let fail = |_: u64, _: usize| -> Result<Vec<u8>, String> { Err("/proc/1/mem at 0x5008: EIO".into()) };
        let e = build(Arch::X86_64, "25".into(), "java".into(), &[], printed, &wanted, false, Some(&fail)).unwrap_err();
        assert!(e.to_string().contains("cannot read the constants it reads: /proc/1/mem at 0x5008"), "{e}");
    }

    #[test]
    fn a_log_that_prints_a_stub_short_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("stubs.log");
        std::fs::write(
            &p,
            "StubRoutines::md5_implCompressMB [0x0000000000001000, 0x0000000000001006] (6 bytes)\n[MachCode]\n  \
             0x0000000000001000: 5548 8bec | \n[/MachCode]\n",
        )
        .unwrap();
        let e = from_log(&p, Arch::X86_64, &wanted_stubs(&[]).unwrap(), false).unwrap_err().to_string();
        assert!(e.contains("`md5_implCompressMB` refused: the log prints 4 of its 6 bytes"), "{e}");
        std::fs::write(
            &p,
            "StubRoutines::md5_implCompressMB [0x0000000000001000, 0x0000000000001006] (6 bytes)\n[MachCode]\n  \
             0x0000000000001000: 5548 8bec | 5dc3\n[/MachCode]\n",
        )
        .unwrap();
        let c = from_log(&p, Arch::X86_64, &wanted_stubs(&[]).unwrap(), false).unwrap();
        assert_eq!((c.stubs.len(), c.absent.len(), c.isa.as_str()), (1, 2, "x86-64"));
    }
}
