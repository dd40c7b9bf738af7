//! On an x86_64 target, assembles the repository's x86_64 MD5 and Poly1305 kernels into the
//! `kernel_lab` library (with clang, as the lab builds guest images), so `lab bench` can time
//! them in-process beside OpenSSL and RustCrypto. Sets `cfg(native_kernels)` when that worked;
//! otherwise `lab bench` reports the native comparison as skipped, with the reason in
//! `KERNEL_LAB_NATIVE_SKIP`. The Poly1305 kernel is assembled a second time at x86-64-v3
//! (`__AVX2__` defined: its AVX2 path) as `poly1305_processBlocks_avx2`, setting
//! `cfg(native_avx2)`, and at x86-64-v4 with AVX-512 IFMA as `poly1305_processBlocks_ifma`
//! (`cfg(native_ifma)`), so the bench also times the vector paths beside OpenSSL's.
//!
//! It also lists every file under `kernels/` and `vectors/` into `$OUT_DIR/bundled.rs` as
//! `include_bytes!` entries, so an installed `lab` carries its kernels and vectors
//! (`kernel_lab::bundled`) and works away from the checkout.

use std::path::{Path, PathBuf};

fn main() {
    embed(&["kernels", "vectors"]);
    println!("cargo:rustc-check-cfg=cfg(native_kernels)");
    println!("cargo:rustc-check-cfg=cfg(native_avx2)");
    println!("cargo:rustc-check-cfg=cfg(native_ifma)");
    let sources = ["kernels/x86_64/md5.S", "kernels/x86_64/poly1305.S"];
    for s in sources {
        println!("cargo:rerun-if-changed={s}");
    }
    let skip = |why: &str| println!("cargo:rustc-env=KERNEL_LAB_NATIVE_SKIP={why}");
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        skip("the host is not x86_64, so the x86_64 kernels cannot run natively");
        return;
    }
    match cc::Build::new().compiler("clang").files(sources).cargo_warnings(false).try_compile("kernel_lab_native") {
        Ok(()) => {
            println!("cargo:rustc-cfg=native_kernels");
            println!("cargo:rustc-env=KERNEL_LAB_NATIVE_SKIP=");
            vector_build("avx2", &["-march=x86-64-v3"]);
            vector_build("ifma", &["-march=x86-64-v4", "-mavx512ifma"]);
        }
        Err(e) => {
            println!("cargo:warning=x86_64 kernels not assembled for the native bench: {e}");
            skip("clang could not assemble kernels/x86_64 into the lab at build time (Debian package `clang`)");
        }
    }
}

/// A vector build of kernels/x86_64/poly1305.S with clang `flags` (`-march=x86-64-v3`: its
/// AVX2 path, as the `x86_64+avx2` variant builds it; `-mavx512ifma`: its IFMA path), its entry
/// renamed `poly1305_processBlocks_<name>` by the preprocessor so it links beside the baseline;
/// sets `cfg(native_<name>)`.
fn vector_build(name: &str, flags: &[&str]) {
    let mut b = cc::Build::new();
    b.compiler("clang").file("kernels/x86_64/poly1305.S").cargo_warnings(false);
    for f in flags {
        b.flag(f);
    }
    let entry = format!("poly1305_processBlocks_{name}");
    match b.define("poly1305_processBlocks", entry.as_str()).try_compile(&format!("kernel_lab_native_{name}")) {
        Ok(()) => println!("cargo:rustc-cfg=native_{name}"),
        Err(e) => println!("cargo:warning=x86_64 Poly1305 {name} path not assembled for the native bench: {e}"),
    }
}

/// Writes `$OUT_DIR/bundled.rs`: `FILES`, every file under `dirs` as (path relative to the
/// repository, `include_bytes!` of it), sorted by path.
fn embed(dirs: &[&str]) {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for d in dirs {
        // A folder makes cargo rerun this script when any file below it changes.
        println!("cargo:rerun-if-changed={d}");
        walk(&root, Path::new(d), &mut files);
    }
    files.sort();
    let mut code = String::from("/// Every bundled file: (path relative to the repository, contents).\n");
    code.push_str("pub static FILES: &[(&str, &[u8])] = &[\n");
    for rel in &files {
        // Resolved against the crate's folder when the lab compiles, not now: a target/ that
        // outlives its checkout (moved, or shared) never points at another folder's files.
        let rel = rel.to_string_lossy();
        code.push_str(&format!(
            "    ({rel:?}, include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/\", {rel:?}))),\n"
        ));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("bundled.rs");
    std::fs::write(&out, code).expect("write $OUT_DIR/bundled.rs");
}

/// Every regular file under `root/rel`, as paths relative to `root`.
fn walk(root: &Path, rel: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root.join(rel)) else { return };
    for e in entries.flatten() {
        let path = rel.join(e.file_name());
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(root, &path, files),
            Ok(t) if t.is_file() => files.push(path),
            _ => {}
        }
    }
}
