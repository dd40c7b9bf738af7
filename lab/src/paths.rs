//! Where the lab finds its kernels and vectors and puts its build cache.
//!
//! Kernels and vectors: the copy built into the binary ([`crate::bundled`], written once into
//! the cache), so an installed `lab` works from any folder; `KERNEL_LAB_ROOT=<checkout>` uses a
//! checkout's live `kernels/` and `vectors/` instead (edit a kernel, run, no rebuild).
//! Cache: `$KERNEL_LAB_CACHE`, else `$XDG_CACHE_HOME/kernel-lab`, else `~/.cache/kernel-lab`
//! (the XDG base directory rule), else `kernel-lab` in the temporary folder; `--cache-dir`
//! overrides it per command.

use std::path::PathBuf;
use std::sync::OnceLock;

/// Where `kernels/` and `vectors/` come from: `$KERNEL_LAB_ROOT`, else the bundled copy in
/// the cache ([`bundled_root`]).
pub fn root() -> PathBuf {
    match std::env::var_os("KERNEL_LAB_ROOT") {
        Some(r) => PathBuf::from(r),
        // A copy that cannot be written yields a path that does not exist: the build names it,
        // and `lab doctor` shows why (bundled_root's error).
        None => bundled_root().unwrap_or_else(|_| cache_dir().join("bundled-unavailable")),
    }
}

/// The bundled kernels and vectors, extracted into [`cache_dir`] once per process.
///
/// # Errors
/// Why the copy could not be written (the path and the I/O error).
pub fn bundled_root() -> Result<PathBuf, String> {
    static ROOT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ROOT.get_or_init(|| crate::bundled::extract(&cache_dir())).clone()
}

/// `kernels/` under the root.
pub fn kernels_dir() -> PathBuf {
    root().join("kernels")
}

/// `vectors/` under the root.
pub fn vectors_dir() -> PathBuf {
    root().join("vectors")
}

/// The cache folder (see the module comment): built images and the bundled copy.
pub fn cache_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("KERNEL_LAB_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("kernel-lab")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("kernel-lab")))
        .unwrap_or_else(|| std::env::temp_dir().join("kernel-lab"))
}
