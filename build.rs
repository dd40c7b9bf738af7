//! On an x86_64 target, assembles the repository's x86_64 MD5 and Poly1305 kernels into the
//! `kernel_lab` library (with clang, as the lab builds guest images), so `lab bench` can time
//! them in-process beside OpenSSL and RustCrypto. Sets `cfg(native_kernels)` when that worked;
//! otherwise `lab bench` reports the native comparison as skipped, with the reason in
//! `KERNEL_LAB_NATIVE_SKIP`.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(native_kernels)");
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
        }
        Err(e) => {
            println!("cargo:warning=x86_64 kernels not assembled for the native bench: {e}");
            skip("clang could not assemble kernels/x86_64 into the lab at build time (Debian package `clang`)");
        }
    }
}
