//! Cross-building kernel images from source with one toolchain for every target
//! (clang + ld.lld, docs/DESIGN.md "Toolchain"), and finding the external tools the backends run.
//!
//! Images are cached by a content hash of the sources and the flags, so an edited `.S` file
//! is rebuilt on the next run and an unchanged one is not.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::protocol;
use crate::variant::{Arch, Variant};

/// An external program and the Debian package that brings it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    /// Program name looked up on `PATH`.
    pub program: &'static str,
    /// Debian 12 package that installs it.
    pub package: &'static str,
}

/// The assembler driver (`clang`, package `clang`).
pub const CLANG: Tool = Tool { program: "clang", package: "clang" };
/// The linker (`ld.lld`, package `lld`).
pub const LLD: Tool = Tool { program: "ld.lld", package: "lld" };

/// The qemu-user binary for `arch` (package `qemu-user`).
pub fn qemu_tool(arch: Arch) -> Tool {
    arch.spec().qemu
}

/// Errors while finding tools or building an image.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    /// A program is not on `PATH`.
    #[error("`{}` not found on PATH: install the Debian package `{}` (sudo apt-get install {}, or run ci/setup.sh)", .0.program, .0.package, .0.package)]
    Missing(Tool),
    /// The kernel folder for an architecture is missing or has no `.S` files.
    #[error("{}: no kernel sources (*.S) for {arch}", dir.display())]
    NoSources { dir: PathBuf, arch: Arch },
    /// Reading sources or writing the cache failed.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// clang or ld.lld exited with an error.
    #[error("building {variant}: `{command}` failed:\n{stderr}")]
    Failed { variant: &'static str, command: String, stderr: String },
}

/// Finds `tool` on `PATH`.
///
/// # Errors
/// [`ToolchainError::Missing`] naming the Debian package.
pub fn find(tool: Tool) -> Result<PathBuf, ToolchainError> {
    which::which(tool.program).map_err(|_| ToolchainError::Missing(tool))
}

/// Where built images go and where their sources come from.
#[derive(Debug, Clone)]
pub struct BuildConfig {
    /// The folder holding `<arch>/*.S` (the repository's `kernels/` by default).
    pub kernels_dir: PathBuf,
    /// Cache folder; images land in `<cache>/<variant>/<hash>/lab.elf`.
    pub cache_dir: PathBuf,
}

/// The `.S` sources of `arch`, sorted, with `driver.S` last so that `lab_arena` (the last
/// object of the driver's `.bss`) ends the image.
fn sources(dir: &Path, arch: Arch) -> Result<Vec<PathBuf>, ToolchainError> {
    let io = |source| ToolchainError::Io { path: dir.to_path_buf(), source };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "S"))
        .collect();
    files.sort_by_key(|p| (p.file_name().is_some_and(|n| n == "driver.S"), p.clone()));
    if files.is_empty() {
        return Err(ToolchainError::NoSources { dir: dir.to_path_buf(), arch });
    }
    Ok(files)
}

/// File name of the generated protocol header every `driver.S` includes.
pub const PROTOCOL_HEADER: &str = "lab_protocol.h";

/// Content hash of everything that determines the image: variant flags, the generated protocol
/// header and every file of the folder (the `.S` sources and anything they `#include`).
fn build_key(variant: &Variant, header: &str, files: &[PathBuf]) -> Result<String, ToolchainError> {
    let mut h = Sha256::new();
    h.update(variant.arch.spec().clang_triple.as_bytes());
    h.update(variant.march.as_bytes());
    h.update((header.len() as u64).to_le_bytes());
    h.update(header.as_bytes());
    h.update(KERNEL_DATA_MARK.as_bytes());
    for f in files {
        let data = std::fs::read(f).map_err(|source| ToolchainError::Io { path: f.clone(), source })?;
        h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
        h.update((data.len() as u64).to_le_bytes());
        h.update(&data);
    }
    let mut key = String::new();
    for b in &h.finalize()[..8] {
        let _ = write!(key, "{b:02x}");
    }
    Ok(key)
}

/// Runs a build command, turning a failure into [`ToolchainError::Failed`].
fn run(variant: &Variant, cmd: &mut Command) -> Result<(), ToolchainError> {
    let command = format!("{cmd:?}").replace('"', "");
    let out = cmd.output().map_err(|source| ToolchainError::Io { path: PathBuf::from(cmd.get_program()), source })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    Err(ToolchainError::Failed { variant: variant.name, command, stderr })
}

/// Linked between the kernels and `driver.o`: an empty, page-aligned `.bss` section whose
/// symbol ([`crate::image::KERNEL_DATA_END`]) starts the driver's data on a page of its own, so
/// the kernels' writable data can be mapped read-only during calls without the driver's.
const KERNEL_DATA_MARK: &str = "\t.bss\n\t.p2align 12\n\t.globl lab_kernel_data_end\nlab_kernel_data_end:\n";

/// Assembles and links `kernels/<arch>/*.S` for `variant`, or returns the cached image.
///
/// Returns the path of a static freestanding ELF (`ld.lld -static -nostdlib -e _start`).
/// Every source is assembled with `-I <build>/include`, where the lab writes
/// [`PROTOCOL_HEADER`] rendered from [`crate::protocol`].
///
/// # Errors
/// A missing tool (naming its Debian package), no sources, an I/O error, or the assembler's
/// or linker's own message.
pub fn build_image(cfg: &BuildConfig, variant: &Variant) -> Result<PathBuf, ToolchainError> {
    build_image_with(cfg, variant, &protocol::Spec::current())
}

/// [`build_image`] with the protocol header rendered from `spec` instead of the current
/// protocol: lets a test show that a changed definition reaches every driver.
///
/// # Errors
/// As [`build_image`].
pub fn build_image_with(
    cfg: &BuildConfig,
    variant: &Variant,
    spec: &protocol::Spec,
) -> Result<PathBuf, ToolchainError> {
    let src_dir = cfg.kernels_dir.join(variant.arch.name());
    let files = sources(&src_dir, variant.arch)?;
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&src_dir)
        .map_err(|source| ToolchainError::Io { path: src_dir.clone(), source })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    inputs.sort();
    let header = protocol::c_header(spec);
    let out_dir = cfg.cache_dir.join(variant.name).join(build_key(variant, &header, &inputs)?);
    let elf = out_dir.join("lab.elf");
    if elf.is_file() {
        return Ok(elf);
    }
    let clang = find(CLANG)?;
    let lld = find(LLD)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ToolchainError::Io { path, source }
    };
    let parent = cfg.cache_dir.join(variant.name);
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    // A private folder per build: tests build the same variant from several threads at once.
    let tmp = tempfile::Builder::new().prefix(".build-").tempdir_in(&parent).map_err(io(&parent))?;
    let tmp_dir = tmp.path().to_path_buf();
    // The protocol header, generated from lab/src/protocol.rs, found with -I before anything else.
    let include = tmp_dir.join("include");
    std::fs::create_dir_all(&include).map_err(io(&include))?;
    std::fs::write(include.join(PROTOCOL_HEADER), &header).map_err(io(&include))?;
    let mark = tmp_dir.join("lab_kernel_data_end.S");
    std::fs::write(&mark, KERNEL_DATA_MARK).map_err(io(&mark))?;
    let mut sources = files.clone();
    let driver_at = sources.iter().position(|p| p.file_name().is_some_and(|n| n == "driver.S"));
    sources.insert(driver_at.unwrap_or(sources.len()), mark);
    let mut objects = Vec::new();
    for src in &sources {
        let obj = tmp_dir.join(src.file_stem().unwrap_or_default()).with_extension("o");
        run(
            variant,
            Command::new(&clang)
                .arg(format!("--target={}", variant.arch.spec().clang_triple))
                .arg(format!("-march={}", variant.march))
                .args(variant.arch.spec().clang_flags)
                .arg("-I")
                .arg(&include)
                .arg("-c")
                .arg("-o")
                .arg(&obj)
                .arg(src),
        )?;
        objects.push(obj);
    }
    let tmp_elf = tmp_dir.join("lab.elf");
    run(variant, Command::new(&lld).args(["-static", "-nostdlib", "-e", "_start", "-o"]).arg(&tmp_elf).args(&objects))?;
    // Rename the whole folder into place so a half-built image is never taken from the cache;
    // if another build won the race, its identical image is used.
    let tmp_dir = tmp.keep();
    if std::fs::rename(&tmp_dir, &out_dir).is_err() && !elf.is_file() {
        return Err(io(&out_dir)(std::io::Error::other("could not move the built image into the cache")));
    }
    let _ = std::fs::remove_dir_all(&tmp_dir);
    Ok(elf)
}
