//! `lab doctor`: is this machine set up to run the lab? Checks the external tools (naming the
//! Debian package of each missing one; exactly the list `lab run` asks for, [`toolchain::run_tools`]), the Unicorn engine linked into the lab, the kernel and
//! vector folders, and that the toolchain builds for every variant (a tiny probe, from
//! scratch), every variant's image builds (through the lab's content-keyed image cache, as for
//! `lab run`) and runs one tiny batch on every backend that can run it.

use std::path::Path;
use std::process::Command;

use crate::backend::{BackendError, BackendKind, Limits};
use crate::exit::ExitCode;
use crate::finding::Class;
use crate::image::Image;
use crate::report::Row;
use crate::run;
use crate::toolchain::{self, BuildConfig, Tool, ToolchainError};
use crate::variant::{Kernel, Variant, VARIANTS};
use crate::vectors::{Body, Vector, VectorSet};

mod check;
pub mod vector;

pub use check::{Check, State};

/// Every check, in the order run.
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    /// Tools, engine, folders, then variant × backend.
    pub checks: Vec<Check>,
}

impl Diagnosis {
    /// Debian packages that would bring every missing program, sorted, without repeats.
    pub fn missing_packages(&self) -> Vec<&'static str> {
        let mut p: Vec<&'static str> = self
            .checks
            .iter()
            .filter_map(|c| match c.state {
                State::Missing { package, .. } => Some(package),
                _ => None,
            })
            .collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// Passed when everything works (not-applicable cells are fine); an error when something is
    /// missing or broken (it wins: the set-up comes first); failed when the set-up works but a
    /// kernel gave a wrong answer (the `lab run` table).
    pub fn exit_code(&self) -> ExitCode {
        let any = |f: fn(&State) -> bool| self.checks.iter().any(|c| f(&c.state));
        if any(|s| matches!(s, State::Missing { .. } | State::Failed(_))) {
            ExitCode::Error
        } else if any(|s| matches!(s, State::WrongAnswer(_))) {
            ExitCode::Failed
        } else {
            ExitCode::Passed
        }
    }
}

/// The cache's sealed files (images, driver objects) against their seals
/// ([`crate::cache_seal`]): a changed file is removed, so the variant checks after this one
/// (and the next `lab run`) build it again; the check says which and why.
fn cache_check(cache: &Path) -> Check {
    let bad = crate::cache_seal::check_tree(cache);
    let what = "image cache".to_string();
    if bad.is_empty() {
        return Check {
            what,
            state: State::Ok(format!("{}: every cached image and object matches its seal", cache.display())),
        };
    }
    for (p, _) in &bad {
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_file(crate::cache_seal::seal_path(p));
    }
    let list: Vec<String> = bad.iter().take(3).map(|(p, why)| format!("{}: {why}", p.display())).collect();
    let more = if bad.len() > 3 { format!("; and {} more", bad.len() - 3) } else { String::new() };
    let n = bad.len();
    Check {
        what,
        state: State::Warning(format!("{n} cached files removed to be built again: {}{more}", list.join("; "))),
    }
}

/// Runs every check. Images are built from `kernels_dir` into the lab's image cache
/// ([`crate::paths::cache_dir`]), keyed by a hash of every input as for `lab run` (a cached image
/// is the one these sources and flags give); the toolchain itself is exercised from scratch for
/// every variant even when the cache is warm ([`toolchain::probe`]).
pub fn diagnose(kernels_dir: &Path, vectors_dir: &Path) -> Diagnosis {
    let mut d = Diagnosis::default();
    let tools = toolchain::run_tools().into_iter();
    d.checks.extend(tools.map(|t| Check { what: t.program.into(), state: tool_state(t) }));
    // Variants whose `-cpu` adds properties to the model (riscv64: the Zb* switches).
    let with_properties = VARIANTS.iter().filter(|v| v.qemu_cpu != v.arch.spec().isa.qemu_cpu_model);
    d.checks.extend(with_properties.map(qemu_cpu_check));
    d.checks.extend(vector::checks());
    d.checks.extend(crate::arch::Arch::ALL.into_iter().map(qemu_cpu_help_check));
    d.checks.push(Check { what: "unicorn".into(), state: unicorn_state() });
    d.checks.push(Check { what: "guest confinement".into(), state: confinement_state() });
    d.checks.push(folder_check("kernels", kernels_dir));
    d.checks.push(folder_check("vectors", vectors_dir));
    d.checks.push(cache_check(&crate::paths::cache_dir()));
    d.checks.extend(capture_checks());
    let build = BuildConfig { kernels_dir: kernels_dir.to_path_buf(), cache_dir: crate::paths::cache_dir() };
    for v in &VARIANTS {
        d.checks.extend(variant_checks(&build, v));
    }
    d
}

/// Which architectures' HotSpot stubs `lab capture` can take on this host: the host's, by
/// capturing them from `java` on PATH (Debian package openjdk-17-jdk-headless, which
/// `ci/setup.sh` installs); another architecture's by starting its multiarch JDK under
/// qemu-user (`java -version`: a capture there takes 15-40 s); the others are not applicable,
/// with the reason ([`crate::hotspot::capturable_arches`]).
fn capture_checks() -> Vec<Check> {
    crate::hotspot::capturable_arches()
        .into_iter()
        .map(|(arch, can)| {
            let host = Some(arch) == crate::arch::Arch::host();
            let state = match can {
                Err(_) if host && arch.spec().hotspot.check.is_some() => {
                    State::Missing { program: "java", package: "openjdk-17-jdk-headless" }
                }
                Err(why) => State::NotApplicable(why),
                Ok(java) if host => capture_state(std::path::Path::new(&java)),
                Ok(java) => foreign_jvm_state(std::path::Path::new(&java)),
            };
            Check { what: format!("capture {arch} stubs"), state }
        })
        .collect()
}

/// Captures the stubs of `java` once (a few seconds) and says what it got.
fn capture_state(java: &Path) -> State {
    let wanted = crate::hotspot::STUBS.iter().map(|(h, _)| *h).collect::<Vec<_>>();
    match crate::hotspot::from_jvm(java, &[], &wanted, false) {
        Ok(c) => {
            let got: Vec<&str> = c.stubs.iter().map(|s| s.hotspot.as_str()).collect();
            let absent =
                if c.absent.is_empty() { String::new() } else { format!("; not generated: {}", c.absent.join(", ")) };
            State::Ok(format!("{}: {}{absent} (lab capture, lab run --hotspot java)", c.describe(), got.join(", ")))
        }
        Err(e) => State::Failed(format!("lab capture --java {}: {e}", java.display())),
    }
}

/// Starts another architecture's `java -version` under qemu-user and says what answered.
fn foreign_jvm_state(java: &Path) -> State {
    let answer = crate::hotspot::jvm::launcher(java).map_err(|e| e.to_string()).and_then(|(mut cmd, qemu)| {
        let out = crate::tool_run::output(cmd.arg("-version"), crate::tool_run::FOREIGN_JVM)
            .map_err(|e| format!("`java -version`: {e}"))?;
        let text = String::from_utf8_lossy(&out.stderr);
        let first = text.lines().next().unwrap_or("").trim().to_string();
        match (out.status.success(), qemu) {
            (true, Some(qemu)) => Ok(format!("{first}, under {qemu}")),
            (true, None) => Ok(first),
            (false, _) => Err(format!("`{} -version` failed: {first}", java.display())),
        }
    });
    match answer {
        Ok(what) => State::Ok(format!("{} ({what}): lab capture --java {0}", java.display())),
        Err(e) => State::Failed(e),
    }
}

/// Found on `PATH` and answers `--version`: path and the first line of the answer.
fn tool_state(tool: Tool) -> State {
    let path = match toolchain::find(tool) {
        Ok(p) => p,
        Err(_) => return State::Missing { program: tool.program, package: tool.package },
    };
    match crate::tool_run::output(Command::new(&path).arg("--version"), crate::tool_run::QUICK) {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            State::Ok(format!("{}: {}", path.display(), text.lines().next().unwrap_or("").trim()))
        }
        Ok(out) => State::Failed(format!("`{} --version` exited with {}", path.display(), out.status)),
        Err(e) => State::Failed(format!("{}: {e}", path.display())),
    }
}

/// The version the C core vendored by unicorn-engine(-sys) 2.1.5 reports through `uc_version`:
/// its `unicorn.h` still says `UC_API_PATCH 4`. A system libunicorn (Debian 12's 2.0.1) reports
/// its own.
pub const VENDORED_UNICORN: (u32, u32, u32) = (2, 1, 4);

/// The Unicorn core linked into the lab, by the version it reports: the vendored one, or a
/// system library that pkg-config found at build time (a failure: its behaviour differs).
fn unicorn_state() -> State {
    let (mut major, mut minor) = (0u32, 0u32);
    // SAFETY: uc_version only writes the two integers through the pointers given, which point to
    // live locals, and returns the packed version; it has no other effect.
    let packed = unsafe { unicorn_engine::uc_version(&mut major, &mut minor) };
    let found = (major, minor, (packed >> 8) & 0xff);
    let (a, b, c) = found;
    if found == VENDORED_UNICORN {
        State::Ok(format!(
            "Unicorn {a}.{b}.{c} in-process: the C core vendored by the unicorn-engine 2.1.5 crate, linked into lab"
        ))
    } else {
        State::Failed(format!(
            "the linked Unicorn core reports {a}.{b}.{c}, not the {}.{}.{} vendored by unicorn-engine 2.1.5: a system \
             libunicorn was linked; rebuild with UNICORN_NO_PKG_CONFIG=1 (.cargo/config.toml sets it in the repository)",
            VENDORED_UNICORN.0, VENDORED_UNICORN.1, VENDORED_UNICORN.2
        ))
    }
}

/// Does qemu-user (`qemu-riscv64`) take the variant's `-cpu` string (`rv64,zba=false,zbb=false,...`)?
/// qemu parses the CPU properties before it loads the program, so running it on the lab's own
/// (x86_64) executable answers without a guest: "Invalid ELF image" means the properties were
/// taken; "can't apply global ... Property ... not found" means this qemu lacks them.
fn qemu_cpu_check(variant: &'static Variant) -> Check {
    let tool = toolchain::qemu_tool(variant.arch);
    let what = format!("{} -cpu ({variant})", tool.program);
    let Ok(qemu) = toolchain::find(tool) else {
        return Check { what, state: State::Missing { program: tool.program, package: tool.package } };
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| "/bin/sh".into());
    let state = match crate::tool_run::output(
        Command::new(&qemu).arg("-cpu").arg(variant.qemu_cpu).arg(&exe),
        crate::tool_run::QUICK,
    ) {
        Err(e) => State::Failed(format!("{}: {e}", qemu.display())),
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            match stderr.lines().find(|l| l.contains("Property") || l.contains("can't apply")) {
                Some(line) => State::Failed(format!(
                    "{} rejects -cpu {}: {} (qemu before 7.0, such as Ubuntu 22.04's 6.2, lacks the Zb* CPU \
                     properties the riscv64 variants use: install qemu-user 7.0 or later, e.g. Debian 12's 7.2)",
                    qemu.display(),
                    variant.qemu_cpu,
                    line.trim()
                )),
                None => State::Ok(format!("accepts -cpu {}", variant.qemu_cpu)),
            }
        }
    };
    Check { what, state }
}

/// What `qemu-<arch> -cpu help` lists: the CPU models (under "Available CPUs:"; x86 lines
/// start with `x86`, the riscv64 list has no heading) and, where it lists them, the CPUID flag
/// properties (x86: "Recognized CPUID flags:"; `None` when the text has no such list).
pub fn cpu_help_names(help: &str) -> (Vec<String>, Option<Vec<String>>) {
    let (models_part, flags_part) = match help.split_once("Recognized CPUID flags:") {
        Some((m, f)) => (m, Some(f)),
        None => (help, None),
    };
    let models = models_part
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_end().ends_with(':'))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let first = words.next()?;
            if first == "x86" { words.next() } else { Some(first) }.map(String::from)
        })
        .collect();
    let flags = flags_part.map(|f| {
        let block = f.trim_start_matches(['\n', '\r']).split("\n\n").next().unwrap_or_default();
        block.split_whitespace().map(String::from).collect()
    });
    (models, flags)
}

/// The `-cpu` models and properties the arch row uses (every extension row, not only the
/// variants': a user's `--isa` reaches them all) that `help` does not list, as "model `max`",
/// "property `sse3`". Properties are checked only where the help lists them (x86); elsewhere
/// `qemu_cpu_check` runs qemu with each variant's `-cpu`.
pub fn unlisted_cpu_names(arch: crate::arch::Arch, help: &str) -> Vec<String> {
    use crate::arch::QemuSupport;
    let (models, flags) = cpu_help_names(help);
    let isa = &arch.spec().isa;
    let mut wanted_models = vec![isa.qemu_cpu_model];
    let mut properties = Vec::new();
    for e in isa.extensions {
        match e.qemu {
            QemuSupport::Model(m) if !wanted_models.contains(&m) => wanted_models.push(m),
            QemuSupport::Property { name, .. } if !properties.contains(&name) => properties.push(name),
            _ => {}
        }
    }
    let mut out: Vec<String> =
        wanted_models.iter().filter(|m| !models.iter().any(|x| x == *m)).map(|m| format!("model `{m}`")).collect();
    if let Some(flags) = flags {
        out.extend(properties.iter().filter(|p| !flags.iter().any(|f| f == *p)).map(|p| format!("property `{p}`")));
    }
    out
}

/// `qemu-<arch> -cpu help` against every `-cpu` model and property the arch row uses: names
/// each one this qemu lacks.
fn qemu_cpu_help_check(arch: crate::arch::Arch) -> Check {
    let tool = toolchain::qemu_tool(arch);
    let what = format!("{} -cpu help", tool.program);
    let Ok(qemu) = toolchain::find(tool) else {
        return Check { what, state: State::Missing { program: tool.program, package: tool.package } };
    };
    let state = match crate::tool_run::output(Command::new(&qemu).args(["-cpu", "help"]), crate::tool_run::QUICK) {
        Err(e) => State::Failed(format!("{}: {e}", qemu.display())),
        Ok(out) => {
            let help = String::from_utf8_lossy(&out.stdout);
            match unlisted_cpu_names(arch, &help).as_slice() {
                [] => State::Ok(format!("lists every -cpu model and property the {arch} rows use")),
                missing => State::Failed(format!(
                    "{} -cpu help does not list {} that the {arch} rows use (lab/src/arch/{arch}.rs): a variant or \
                     declared ISA needing it cannot run on qemu; install qemu-user 7.2 (Debian 12)",
                    qemu.display(),
                    missing.join(", ")
                )),
            }
        }
    };
    Check { what, state }
}

/// seccomp and Landlock for the qemu and native guests (lab/src/backend/process/confine.rs),
/// the witness of qemu guests (a traced `true`: backend/process/witness.rs) and Landlock for the
/// builds (lab/src/build_confine.rs); a missing layer is a warning: runs still work, with less
/// confinement.
fn confinement_state() -> State {
    let s = crate::sandbox::Support::probe();
    let mut gaps = s.gaps();
    gaps.extend(crate::build_confine::gaps().into_iter().map(|g| format!("builds: {g}")));
    if s.seccomp {
        if let Err(why) = crate::backend::witness_probe() {
            gaps.push(format!(
                "qemu guests would run without the host's witness ({why}): a protection lift undone within a call \
                 or a fault swallowed by the kernel's own handler is not seen"
            ));
        }
    }
    if gaps.is_empty() {
        State::Ok(format!(
            "seccomp filters and Landlock ABI {} (qemu and native guests and the builds are confined; qemu guests \
             traced by the host's witness)",
            s.landlock_abi
        ))
    } else {
        State::Warning(gaps.join("; "))
    }
}

fn folder_check(what: &str, dir: &Path) -> Check {
    let from_root = std::env::var_os("KERNEL_LAB_ROOT").is_some();
    let state = match (dir.is_dir(), from_root, crate::paths::bundled_root()) {
        (true, true, _) => State::Ok(format!("{} (from $KERNEL_LAB_ROOT)", dir.display())),
        (true, false, _) => State::Ok(format!("{} (the copy built into lab)", dir.display())),
        (false, true, _) => {
            State::Failed(format!("{} is not a folder ($KERNEL_LAB_ROOT must name a checkout)", dir.display()))
        }
        (false, false, Err(e)) => {
            State::Failed(format!("cannot write the copy built into lab: {e} (set --cache-dir or KERNEL_LAB_CACHE)"))
        }
        (false, false, Ok(_)) => State::Failed(format!("{} is not a folder", dir.display())),
    };
    Check { what: what.into(), state }
}

/// Probes the toolchain for `variant`, builds its image and runs the tiny batch on every backend.
fn variant_checks(build: &BuildConfig, variant: &'static Variant) -> Vec<Check> {
    let image = toolchain::probe(variant)
        .and_then(|()| toolchain::build_image(build, variant))
        .map_err(build_state)
        .and_then(|p| Image::load(&p, variant.arch).map_err(|e| State::Failed(format!("cannot load the image: {e}"))));
    BackendKind::ALL
        .into_iter()
        .map(|kind| {
            let what = format!("{variant} on {kind}");
            let state = match (&image, kind.supports(variant)) {
                (_, Err(reason)) => State::NotApplicable(reason),
                (Err(s), Ok(())) => s.clone(),
                (Ok(image), Ok(())) => backend_state(variant, kind, image),
            };
            Check { what, state }
        })
        .collect()
}

fn build_state(e: ToolchainError) -> State {
    match e {
        ToolchainError::Missing(t) => State::Missing { program: t.program, package: t.package },
        other => State::Failed(other.to_string()),
    }
}

/// Opens the backend and runs [`tiny_sets`] through it.
fn backend_state(variant: &'static Variant, kind: BackendKind, image: &Image) -> State {
    let mut backend = match kind.open(variant, image, Limits::default()) {
        Ok(b) => b,
        Err(BackendError::Tool(ToolchainError::Missing(t))) => {
            return State::Missing { program: t.program, package: t.package }
        }
        Err(e) => return State::Failed(format!("cannot start: {e}")),
    };
    let entry = crate::cases::plan::Stubs::of(image);
    let rows: Vec<Row> = tiny_sets()
        .iter()
        .filter(|s| entry.missing(s.kernel).is_none())
        .map(|s| run::run_set(backend.as_mut(), variant, image, s, 1))
        .collect();
    let passed: usize = rows.iter().map(|r| r.passed()).sum();
    match rows.iter().flat_map(|r| r.failed()).next() {
        // Nothing ran at all: the backend, not the kernel, is at fault.
        Some(f) if f.findings.iter().all(|f| f.class == Class::NotRun) => {
            State::Failed(format!("cannot run a batch: {}", f.findings.first().map(|f| f.text.as_str()).unwrap_or("")))
        }
        Some(f) => {
            State::WrongAnswer(format!("{}: {}", f.name, f.findings.first().map(|f| f.text.as_str()).unwrap_or("")))
        }
        None if passed == 0 => State::Failed("the image defines no kernel".into()),
        None => State::Ok(format!(
            "built and ran {passed} cases ({})",
            rows.iter().map(|r| r.kernel.name()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// One vector per kernel: MD5("abc") (RFC 1321 A.5) and the Poly1305 example of RFC 8439
/// §2.5.2.
fn tiny_sets() -> [VectorSet; 2] {
    let h = |s: &str| hex::decode(s).expect("hex literal");
    let set = |kernel: Kernel, name: &str, source: &str, body: Body| VectorSet {
        file: "(lab doctor)".into(),
        kernel,
        set: "doctor".into(),
        vectors: vec![Vector { index: 0, name: name.into(), source: source.into(), offsets: vec![0], body }],
    };
    [
        set(
            Kernel::Md5,
            "MD5(\"abc\")",
            "RFC 1321 A.5",
            Body::Md5Digest {
                msg: b"abc".to_vec().into(),
                digest: h("900150983cd24fb0d6963f7d28e17f72").try_into().expect("16 bytes"),
                updates: Vec::new(),
            },
        ),
        set(
            Kernel::Poly1305,
            "RFC 8439 2.5.2",
            "RFC 8439 §2.5.2",
            Body::Poly1305Tag {
                key: h("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b")
                    .try_into()
                    .expect("32 bytes"),
                msg: b"Cryptographic Forum Research Group".to_vec().into(),
                tag: h("a8061dc1305136c6c22b8baf0c0127a9").try_into().expect("16 bytes"),
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;

    const X86_HELP: &str = "Available CPUs:\nx86 486                   (alias configured by machine type)\n\
        x86 qemu64                (alias configured by machine type)\n\nRecognized CPUID flags:\n  \
        abm adx aes avx avx2 avx512bw avx512cd avx512dq avx512f avx512ifma avx512vl bmi1 bmi2\n  \
        cx16 f16c fma movbe pclmulqdq pni popcnt sha-ni ssse3 sse4.1 sse4.2 xsave\n\n";

    #[test]
    fn the_help_lists_models_and_flags() {
        let (models, flags) = cpu_help_names(X86_HELP);
        assert_eq!(models, ["486", "qemu64"]);
        let flags = flags.expect("x86 lists flags");
        assert!(flags.contains(&"pni".to_string()) && flags.contains(&"xsave".to_string()), "{flags:?}");
        let (models, flags) = cpu_help_names("any\nrv64\nsifive-u54\n");
        assert_eq!((models, flags), (vec!["any".into(), "rv64".into(), "sifive-u54".into()], None));
        let (models, _) = cpu_help_names("Available CPUs:\n  cortex-a72\n  max\n");
        assert_eq!(models, ["cortex-a72", "max"]);
    }

    #[test]
    fn every_x86_property_the_rows_use_is_in_qemu_7_2_s_list_and_a_missing_one_is_named() {
        assert_eq!(unlisted_cpu_names(Arch::X86_64, X86_HELP), Vec::<String>::new());
        let without_xsave = X86_HELP.replace(" xsave", "");
        assert_eq!(unlisted_cpu_names(Arch::X86_64, &without_xsave), ["property `xsave`"]);
        assert_eq!(unlisted_cpu_names(Arch::Aarch64, "Available CPUs:\n  cortex-a72\n"), ["model `max`"]);
    }
}
