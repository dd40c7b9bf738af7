//! Per-architecture facts live in one row per architecture (`lab/src/arch/`): a `match` on
//! `Arch` (or a comparison with one of its values) anywhere else in `lab/src` fails this test,
//! which names the file and line and says where the fact belongs.

use std::path::{Path, PathBuf};

use kernel_lab::variant::Arch;

const VALUES: [&str; 3] = ["Arch::Riscv64", "Arch::Aarch64", "Arch::X86_64"];

/// Why `line` decides something per architecture, if it does: an arm (`Arch::X86_64 =>`, also
/// in tuples and or-patterns), `matches!` on a value, a comparison with a value, or a glob
/// import of the values (which would let arms drop the `Arch::` prefix).
fn per_arch_decision(line: &str) -> Option<&'static str> {
    let code = line.split("//").next().unwrap_or("");
    let value_at = |i: usize| {
        let before = code[..i].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
    };
    let values: Vec<usize> =
        VALUES.iter().flat_map(|v| code.match_indices(v).map(|(i, _)| i)).filter(|&i| value_at(i)).collect();
    if code.contains("Arch::*") || code.contains("Arch::{") {
        return Some("imports the Arch values");
    }
    if values.is_empty() {
        return None;
    }
    if code.contains("=>") {
        return Some("a match arm on the architecture");
    }
    if code.contains("matches!") {
        return Some("`matches!` on the architecture");
    }
    if code.contains("== Arch::") || code.contains("!= Arch::") {
        return Some("a comparison with one architecture");
    }
    None
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_match_on_the_architecture_outside_lab_src_arch() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("lab/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "found only {} sources under {}", files.len(), src.display());
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !f.starts_with(src.join("arch"))) {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (n, line) in text.lines().enumerate() {
            if let Some(why) = per_arch_decision(line) {
                found.push(format!("{}:{}: {why}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "per-architecture facts belong in the architecture's row (lab/src/arch/<arch>.rs, read through \
         `arch.spec()`), not in a match elsewhere:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_arms_comparisons_and_glob_imports() {
    for line in [
        "        Arch::Riscv64 => &[\"-mno-relax\"],",
        "        Arch::Aarch64 | Arch::X86_64 => &[],",
        "            (Arch::X86_64, 6) => (FaultKind::IllegalInstruction, pc, detail),",
        "    if abi.arch == Arch::X86_64 && rec.flags & DF != 0 {",
        "    if image.arch != Arch::Riscv64 {",
        "    matches!(arch, Arch::Aarch64)",
        "use kernel_lab::variant::Arch::*;",
    ] {
        assert!(per_arch_decision(line).is_some(), "missed: {line}");
    }
    for line in [
        "        arch: Arch::Riscv64,",
        "    let archs = Arch::ALL;",
        "    if Arch::host() == Some(arch) {",
        "    TargetArch::x86_64 => 1,",
        "    // Arch::X86_64 => 2 in a comment",
    ] {
        assert_eq!(per_arch_decision(line), None, "false alarm: {line}");
    }
}

/// Every row is reachable from its enum value and names itself.
#[test]
fn each_arch_has_a_row_and_a_kernel_folder() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    for a in Arch::ALL {
        assert_eq!(a.spec().arch, a);
        assert_eq!(Arch::from_name(a.spec().name), Some(a));
        assert!(kernels.join(a.name()).join("driver.S").is_file(), "kernels/{a}/driver.S");
    }
}
