//! `lab doctor`'s vector-length check: for each architecture row with a vector length (RVV's
//! VLEN, SVE's VL), whether qemu-user runs the vector extension at every default length, proved
//! by a probe program that reads the length back (`csrr vlenb`, `cntd`: the arch row's
//! [`VectorLengthSpec::probe`](crate::arch::VectorLengthSpec::probe)).

use std::path::Path;
use std::process::Command;

use super::check::{Check, State};
use crate::arch::{Arch, VectorLengthSpec};
use crate::toolchain::{self, CLANG, LLD};
use crate::user_kernel::isa_decl::DeclaredIsa;

/// One check per architecture whose row has a vector length.
pub fn checks() -> Vec<Check> {
    Arch::ALL.into_iter().filter_map(|a| a.spec().isa.vector_length.as_ref().map(|vl| check(a, vl))).collect()
}

/// The ISA string that turns the vector length's last extension on (`rv64gc_v`, `armv8-a+sve2`).
fn vector_isa(arch: Arch, vl: &VectorLengthSpec) -> Result<DeclaredIsa, String> {
    let isa = &arch.spec().isa;
    let ext = vl.extensions.last().ok_or("the row names no extension")?;
    let text = format!("{}{}{ext}", isa.base, isa.march_separator.unwrap_or("+"));
    DeclaredIsa::parse(&text, arch).map_err(|e| e.to_string())
}

fn check(arch: Arch, vl: &'static VectorLengthSpec) -> Check {
    let qemu = toolchain::qemu_tool(arch);
    let what = format!("{} {} ({})", qemu.program, vl.name, vl.extensions.join("/"));
    let isa = match vector_isa(arch, vl) {
        Ok(i) => i,
        Err(e) => return Check { what, state: State::Failed(e) },
    };
    if let Some(why) = isa.qemu_lacks() {
        return Check { what, state: State::NotApplicable(format!("qemu {why}")) };
    }
    let state = match probe_lengths(arch, vl, &isa) {
        Ok(state) => state,
        Err(state) => state,
    };
    Check { what, state }
}

/// Builds the probe and runs it at every default length: Ok with the lengths read back, or the
/// first that differs or fails.
fn probe_lengths(arch: Arch, vl: &VectorLengthSpec, isa: &DeclaredIsa) -> Result<State, State> {
    let missing = |t: toolchain::Tool| State::Missing { program: t.program, package: t.package };
    let qemu_tool = toolchain::qemu_tool(arch);
    let qemu = toolchain::find(qemu_tool).map_err(|_| missing(qemu_tool))?;
    let dir = tempfile::Builder::new()
        .prefix("lab-vector-probe-")
        .tempdir()
        .map_err(|e| State::Failed(format!("a temporary folder: {e}")))?;
    let elf = build(arch, isa, vl.probe, dir.path())?;
    let mut seen = Vec::new();
    for &bits in vl.defaults {
        let cpu = format!("{},{}", isa.qemu_cpu, vl.qemu_properties(bits));
        let out = crate::tool_run::output(Command::new(&qemu).arg("-cpu").arg(&cpu).arg(&elf), crate::tool_run::BUILD)
            .map_err(|e| State::Failed(format!("{}: {e}", qemu.display())))?;
        let want = (bits / vl.probe_unit_bits) as i32;
        match out.status.code() {
            Some(got) if got == want => seen.push(bits.to_string()),
            got => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                return Err(State::Failed(format!(
                    "-cpu {cpu}: the probe read {} {} back instead of {bits} (exit {got:?}){}",
                    vl.name,
                    got.map_or("nothing".to_string(), |g| (g as u32 * vl.probe_unit_bits).to_string()),
                    stderr.lines().next().map(|l| format!(": {l}")).unwrap_or_default()
                )));
            }
        }
    }
    let property = vl.qemu_property.replace("{bits}", "<bits>").replace("{bytes}", "<bytes>");
    Ok(State::Ok(format!("runs {} at {} {} (-cpu {},{property})", isa.text, vl.name, seen.join(", "), isa.qemu_cpu)))
}

/// Assembles and links the probe for `isa` in `dir`: the executable's path.
fn build(arch: Arch, isa: &DeclaredIsa, source: &str, dir: &Path) -> Result<std::path::PathBuf, State> {
    let missing = |t: toolchain::Tool| State::Missing { program: t.program, package: t.package };
    let clang = toolchain::find(CLANG).map_err(|_| missing(CLANG))?;
    let lld = toolchain::find(LLD).map_err(|_| missing(LLD))?;
    let (src, obj, elf) = (dir.join("probe.s"), dir.join("probe.o"), dir.join("probe"));
    std::fs::write(&src, source).map_err(|e| State::Failed(format!("{}: {e}", src.display())))?;
    let mut compile = Command::new(&clang);
    compile.arg(format!("--target={}", arch.spec().clang_triple)).arg(format!("-march={}", isa.march));
    compile.args(["-c", "-o"]).arg(&obj).arg(&src);
    let mut link = Command::new(&lld);
    link.args(["-static", "-o"]).arg(&elf).arg(&obj);
    for step in [&mut compile, &mut link] {
        let out = crate::tool_run::output(step, crate::tool_run::BUILD)
            .map_err(|e| State::Failed(format!("building the vector probe: {e}")))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(State::Failed(format!("building the vector probe (-march={}): {}", isa.march, stderr.trim())));
        }
    }
    Ok(elf)
}
