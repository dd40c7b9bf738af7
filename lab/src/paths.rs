//! Where the lab finds its kernels and vectors and puts its build cache.

use std::path::PathBuf;

use crate::toolchain::BuildConfig;

/// The repository root: `$KERNEL_LAB_ROOT`, else the folder this crate was built from.
pub fn root() -> PathBuf {
    std::env::var_os("KERNEL_LAB_ROOT").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `kernels/` under the root.
pub fn kernels_dir() -> PathBuf {
    root().join("kernels")
}

/// `vectors/` under the root.
pub fn vectors_dir() -> PathBuf {
    root().join("vectors")
}

/// `$CARGO_TARGET_DIR/kernel-lab`, else `target/kernel-lab` under the root.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target")).join("kernel-lab")
}

/// The default build configuration: bundled kernels, default cache.
pub fn default_build() -> BuildConfig {
    BuildConfig { kernels_dir: kernels_dir(), cache_dir: cache_dir() }
}
