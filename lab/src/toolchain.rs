//! Cross-building kernel images from source with one toolchain for every target
//! (clang + ld.lld, docs/DESIGN.md "Toolchain"), and finding the external tools the backends run.
//!
//! Images are cached by a content hash of the sources and the flags, so an edited `.S` file
//! is rebuilt on the next run and an unchanged one is not.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::build_confine::{self, Grants, Limits};
use crate::paths;
use crate::protocol;
use crate::sandbox::Support;
use crate::user_kernel::objects::{self, ObjectError};
use crate::user_kernel::{self, UserKernel};
use crate::variant::{Arch, Variant};

pub use crate::vocab::tool::Tool;

/// The assembler driver (`clang`, package `clang`).
pub const CLANG: Tool = Tool { program: "clang", package: "clang" };
/// The linker (`ld.lld`, package `lld`).
pub const LLD: Tool = Tool { program: "ld.lld", package: "lld" };
/// The disassembler (`llvm-objdump`, package `llvm`): the static ISA scan and the instruction
/// at a fault ([`crate::disasm`]).
pub const LLVM_OBJDUMP: Tool = Tool { program: "llvm-objdump", package: "llvm" };

/// The qemu-user binary for `arch` (package `qemu-user`, named in the arch row).
pub fn qemu_tool(arch: Arch) -> Tool {
    arch.spec().qemu
}

/// Every external program `lab run` asks for, in the order `lab doctor` lists them: the build
/// ([`CLANG`], [`LLD`]), the static ISA scan and fault listings ([`LLVM_OBJDUMP`]) and the qemu
/// backend (one qemu-user binary per architecture). `lab doctor` checks exactly these; a tool
/// the run path starts to need belongs here.
pub fn run_tools() -> Vec<Tool> {
    let mut tools = vec![CLANG, LLD, LLVM_OBJDUMP];
    tools.extend(Arch::ALL.map(qemu_tool));
    tools
}

/// The default build configuration: bundled kernels, default cache.
pub fn default_build() -> BuildConfig {
    BuildConfig { kernels_dir: crate::paths::kernels_dir(), cache_dir: crate::paths::cache_dir() }
}

/// Errors while finding tools or building an image.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    /// A program is not on `PATH`.
    #[error("`{}` not found on PATH: install the Debian package `{}` (sudo apt-get install {}, or run ci/setup.sh)", .0.program, .0.package, .0.package)]
    Missing(Tool),
    /// The kernel folder for an architecture has no sources (`.S`, `.s`), objects (`.o`) or
    /// archives (`.a`) besides a `driver.S`.
    #[error("{}: no kernel sources (*.S), objects (*.o) or archives (*.a) for {arch}", dir.display())]
    NoSources { dir: PathBuf, arch: Arch },
    /// Reading sources or writing the cache failed.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// clang or ld.lld exited with an error.
    #[error("building {variant}: `{command}` failed:\n{stderr}")]
    Failed { variant: &'static str, command: String, stderr: String },
    /// A prebuilt object or archive the image cannot hold, or a contract symbol no object
    /// defines (checked before linking).
    #[error("building {variant}: {source}")]
    Object { variant: String, source: ObjectError },
    /// A kernel source reached for a host file its build may not read ([`crate::build_confine`]).
    #[error(
        "building {variant}: {}: the build was refused access to {} (kernel sources may read only the regular files \
         of their own folder and the lab's include folder)\n{stderr}",
        file.display(),
        refused.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    Refused { variant: &'static str, file: PathBuf, refused: Vec<PathBuf>, stderr: String },
    /// A build tool hit a limit of [`crate::build_confine`] (time, file size, memory).
    #[error("building {variant}: {what}: `{tool}` {why}\n{stderr}")]
    Stopped { variant: &'static str, what: String, tool: String, why: String, stderr: String },
    /// SIGINT or SIGTERM stopped the build ([`crate::interrupt`]).
    #[error("building {variant}: interrupted by {}", crate::interrupt::name(*.signal))]
    Interrupted { variant: &'static str, signal: i32 },
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

/// What one image is built from: kernel sources, prebuilt objects and archives, and how the
/// contract symbols map onto the user's.
#[derive(Debug, Default)]
struct Inputs {
    /// Assembly sources of the kernels (never a `driver.S`: the lab's own is linked).
    sources: Vec<PathBuf>,
    /// Prebuilt relocatable objects and `ar` archives.
    objects: Vec<PathBuf>,
    /// Other files whose contents decide the image (headers next to the sources).
    hashed: Vec<PathBuf>,
    /// (contract symbol, user's symbol) that must be defined: a missing one fails the build.
    required: Vec<(String, String)>,
    /// Entry aliases (contract symbol, user's symbol): ld.lld `--defsym
    /// lab_entry_<contract>=<user's symbol>` ([`crate::protocol::ENTRY_PREFIX`]).
    aliases: Vec<(String, String)>,
    /// The user mapped no symbol with `--symbol` or a manifest: archive members defining the
    /// contract names themselves are pulled too.
    contract_names: bool,
    /// Extra clang flags for the kernel sources (x86_64 `-madx`).
    clang_flags: Vec<String>,
}

/// Whether `p` is a kernel source (`.S`, `.s`) other than a `driver.S`.
fn is_source(p: &Path) -> bool {
    p.extension().is_some_and(|x| x == "S" || x == "s") && p.file_name().is_none_or(|n| n != "driver.S")
}

/// Whether `p` is a prebuilt object or archive (`.o`, `.a`).
fn is_object(p: &Path) -> bool {
    p.extension().is_some_and(|x| x == "o" || x == "a")
}

/// A kernels folder `<dir>` (`kernels/<arch>/`): its sources, objects and archives with the
/// contract names; a `driver.S` there is ignored (the lab links its own).
fn folder_inputs(dir: &Path, arch: Arch) -> Result<Inputs, ToolchainError> {
    let io = |source| ToolchainError::Io { path: dir.to_path_buf(), source };
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(io)?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
    files.sort();
    let sources: Vec<PathBuf> = files.iter().filter(|p| is_source(p)).cloned().collect();
    let objects: Vec<PathBuf> = files.iter().filter(|p| is_object(p)).cloned().collect();
    if sources.is_empty() && objects.is_empty() {
        return Err(ToolchainError::NoSources { dir: dir.to_path_buf(), arch });
    }
    let hashed = files.into_iter().filter(|p| p.file_name().is_none_or(|n| n != "driver.S")).collect();
    Ok(Inputs { sources, objects, hashed, contract_names: true, ..Inputs::default() })
}

/// A user's kernel: its files, its symbol map and the declared ISA's clang flags.
fn user_inputs(k: &UserKernel) -> Inputs {
    let mut hashed: Vec<PathBuf> = k.sources.iter().chain(&k.objects).cloned().collect();
    // Headers a source may include from its own folder.
    for dir in k.sources.iter().filter_map(|s| s.parent()) {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        hashed.extend(
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "h" || x == "inc")),
        );
    }
    hashed.sort();
    hashed.dedup();
    Inputs {
        sources: k.sources.clone(),
        objects: k.objects.clone(),
        hashed,
        required: k.wanted(),
        aliases: k.aliases(),
        contract_names: k.symbols.is_empty(),
        clang_flags: k.isa.clang_flags.clone(),
    }
}

/// The lab's driver for `arch` (`kernels/<arch>/driver.S` of the lab's own kernels: the copy
/// built into the binary, or `$KERNEL_LAB_ROOT`'s), never a user's.
pub fn driver_source(arch: Arch) -> PathBuf {
    paths::kernels_dir().join(arch.name()).join("driver.S")
}

/// File name of the generated protocol header every `driver.S` includes.
pub const PROTOCOL_HEADER: &str = "lab_protocol.h";

/// Content hash of everything that determines the image: variant flags, the generated protocol
/// header, the lab's driver, the kernel inputs (sources, objects, headers beside them) and the
/// symbol map.
fn build_key(variant: &Variant, header: &str, driver: &Path, inputs: &Inputs) -> Result<String, ToolchainError> {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(variant.arch.spec().clang_triple.as_bytes());
    field(variant.march.as_bytes());
    // Dispatch paths of one object share its `-march` but not the driver's (RVV state or not).
    field(driver_march(variant).as_bytes());
    field(header.as_bytes());
    field(KERNEL_DATA_MARK.as_bytes());
    field(b"-g"); // images cached before the sources were assembled with -g are rebuilt
    if !inputs.aliases.is_empty() {
        field(crate::protocol::ENTRY_PREFIX.as_bytes()); // images linked with `--defsym CONTRACT=...` are rebuilt
    }
    for flag in &inputs.clang_flags {
        field(flag.as_bytes());
    }
    for (contract, user) in inputs.required.iter().chain(&inputs.aliases) {
        field(format!("{contract}={user}").as_bytes());
    }
    for f in std::iter::once(driver).chain(inputs.hashed.iter().map(PathBuf::as_path)) {
        let data = std::fs::read(f).map_err(|source| ToolchainError::Io { path: f.to_path_buf(), source })?;
        field(f.file_name().unwrap_or_default().as_encoded_bytes());
        field(&data);
    }
    let mut key = String::new();
    for b in &h.finalize()[..8] {
        let _ = write!(key, "{b:02x}");
    }
    Ok(key)
}

/// Runs a build command confined to `grants` ([`crate::build_confine`]), turning a failure into
/// [`ToolchainError::Failed`], or [`ToolchainError::Refused`] when the tool was refused a file
/// that exists (`source` names the kernel source being built; `None` for the lab's own steps
/// and the link), [`ToolchainError::Stopped`] at a limit, [`ToolchainError::Interrupted`].
fn run(variant: &Variant, source: Option<&Path>, grants: &Grants, cmd: &mut Command) -> Result<(), ToolchainError> {
    let command = format!("{cmd:?}").replace('"', "");
    let limits = Limits::BUILD;
    let interrupted = |signal| ToolchainError::Interrupted { variant: variant.name, signal };
    if let Some(signal) = crate::interrupt::interrupted() {
        return Err(interrupted(signal));
    }
    let out = build_confine::run(cmd, grants, &limits)
        .map_err(|source| ToolchainError::Io { path: PathBuf::from(cmd.get_program()), source })?;
    if out.status.success() && !out.timed_out {
        return Ok(());
    }
    if let Some(signal) = crate::interrupt::interrupted() {
        return Err(interrupted(signal));
    }
    let what = source.map_or_else(|| "linking".to_string(), |s| s.display().to_string());
    if let Some(why) = out.limit_hit(&limits) {
        let tool = Path::new(cmd.get_program()).file_name().unwrap_or_default().to_string_lossy().into_owned();
        return Err(ToolchainError::Stopped { variant: variant.name, what, tool, why, stderr: out.stderr });
    }
    let refused = refused_paths(&out.stderr, source);
    match source {
        Some(source) if !refused.is_empty() && Support::probe().landlock_abi > 0 => Err(ToolchainError::Refused {
            variant: variant.name,
            file: source.to_path_buf(),
            refused,
            stderr: out.stderr,
        }),
        _ => Err(ToolchainError::Failed { variant: variant.name, command, stderr: out.stderr }),
    }
}

/// Paths a tool's error messages quote (`'...'` or `"..."`) that exist on the host: clang says
/// it cannot find (`.incbin`, a path from the working folder) or open (`#include`, "Permission
/// denied", a path from the including file's folder, `source`'s) a file the build was not
/// allowed to read, so one that exists was refused.
fn refused_paths(stderr: &str, source: Option<&Path>) -> Vec<PathBuf> {
    let dir = source.and_then(Path::parent);
    let mut out: Vec<PathBuf> = Vec::new();
    for line in stderr.lines().filter(|l| l.contains("error:")) {
        let beside = if line.contains("Permission denied") { dir } else { None };
        for quoted in line.split(['\'', '"']).skip(1).step_by(2).filter(|q| !q.is_empty()) {
            let path = Path::new(quoted);
            let found = beside
                .map(|d| d.join(path))
                .into_iter()
                .chain(std::iter::once(path.to_path_buf()))
                .find(|p| std::fs::symlink_metadata(p).is_ok());
            if let Some(p) = found.map(|p| std::path::absolute(&p).unwrap_or(p)).filter(|p| !out.contains(p)) {
                out.push(p);
            }
        }
    }
    out
}

/// Linked between the kernels and `driver.o`: an empty, page-aligned `.bss` section whose
/// symbol ([`crate::protocol::KERNEL_DATA_END`]) starts the driver's data on a page of its own, so
/// the kernels' writable data can be mapped read-only during calls without the driver's; and an
/// empty `.text` section whose symbol ([`crate::protocol::KERNEL_TEXT_END`]) ends the kernels'
/// code (ld.lld keeps input order within `.text`), so `lab bench` counts every kernel
/// instruction, helpers outside the contract symbols included.
const KERNEL_DATA_MARK: &str = "\t.bss\n\t.p2align 12\n\t.globl lab_kernel_data_end\nlab_kernel_data_end:\n\
                                \t.text\n\t.globl lab_kernel_text_end\nlab_kernel_text_end:\n";

/// Builds the image of `variant`, or returns the cached one: the kernels (the folder
/// `<kernels_dir>/<arch>/`, or the user's kernel behind a manifest or `--object` variant)
/// linked with the lab's own driver.
///
/// Returns the path of a static freestanding ELF (`ld.lld -static -nostdlib -e _start`).
/// Every source is assembled with `-I <build>/include`, where the lab writes
/// [`PROTOCOL_HEADER`] rendered from [`crate::protocol`]. Prebuilt objects are checked before
/// linking ([`crate::user_kernel::objects`]); each user's name gets a lab-private alias
/// (`--defsym lab_entry_<contract>=<name>`) that the lab calls as the contract, leaving every
/// symbol of the objects as it is (a wrapper calling the library's own `NAME` still reaches it).
///
/// # Errors
/// A missing tool (naming its Debian package), no sources, an I/O error, an object the image
/// cannot hold (naming object and symbol), or the assembler's or linker's own message.
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
    let inputs = match user_kernel::of(variant) {
        Some(k) => user_inputs(k),
        None => lab_inputs(cfg, variant)?,
    };
    build_inputs(cfg, variant, spec, inputs)
}

/// The inputs of a lab-made image: the sources of `<kernels_dir>/<arch>/`, assembled for the
/// variant's ISA.
fn lab_inputs(cfg: &BuildConfig, variant: &Variant) -> Result<Inputs, ToolchainError> {
    let isa = &variant.arch.spec().isa;
    let clang_flags = isa.clang_flags(variant.march, &isa.rows(variant.extensions));
    Ok(Inputs { clang_flags, ..folder_inputs(&cfg.kernels_dir.join(variant.arch.name()), variant.arch)? })
}

/// [`build_image`] from the sources of `<kernels_dir>/<arch>/` for any variant, a user's
/// included (whose own image is built from its objects): the bench's spin image, the lab's
/// driver and `spin.S` assembled for the variant's ISA ([`crate::bench::throughput`]).
///
/// # Errors
/// As [`build_image`].
pub fn build_lab_image(cfg: &BuildConfig, variant: &Variant) -> Result<PathBuf, ToolchainError> {
    build_inputs(cfg, variant, &protocol::Spec::current(), lab_inputs(cfg, variant)?)
}

/// The image of `variant` from `inputs`, cached by everything that goes into it.
fn build_inputs(
    cfg: &BuildConfig,
    variant: &Variant,
    spec: &protocol::Spec,
    inputs: Inputs,
) -> Result<PathBuf, ToolchainError> {
    let driver = driver_source(variant.arch);
    let header = protocol::c_header(spec);
    let out_dir = cfg.cache_dir.join(variant.name).join(build_key(variant, &header, &driver, &inputs)?);
    let elf = out_dir.join("lab.elf");
    if crate::cache_seal::usable(&elf) {
        return Ok(elf);
    }
    let clang = find(CLANG)?;
    let lld = find(LLD)?;
    let parent = cfg.cache_dir.join(variant.name);
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    // A private folder per build: tests build the same variant from several threads at once.
    let tmp = tempfile::Builder::new().prefix(".build-").tempdir_in(&parent).map_err(io(&parent))?;
    let tmp_dir = tmp.path().to_path_buf();
    // The protocol header, generated from lab/src/protocol.rs, found with -I before anything else.
    let include = tmp_dir.join("include");
    std::fs::create_dir_all(&include).map_err(io(&include))?;
    std::fs::write(include.join(PROTOCOL_HEADER), &header).map_err(io(&include))?;
    // What the kernel sources may read: the regular files of their own folders, and the
    // build's folder (the generated include folder, the preprocessed text, the objects).
    let sources_may =
        Grants { folders: source_folders(cfg, variant, &inputs), scratch: Some(tmp_dir.clone()), ..Grants::default() };
    let lab_may = Grants { files: vec![driver.clone()], scratch: Some(tmp_dir.clone()), ..Grants::default() };
    let assemble = |src: &Path, obj: &Path, march: &str, flags: &[String], may: &Grants, user: Option<&Path>| {
        let clang_for = |step: &str| {
            let mut cmd = Command::new(&clang);
            cmd.arg(format!("--target={}", variant.arch.spec().clang_triple))
                .arg(format!("-march={march}"))
                .args(variant.arch.spec().clang_flags)
                .args(flags)
                .arg("-g") // DWARF line tables: the SARIF report maps a pc to its .S line
                // A crashing clang writes a reproducer beside the system's temporary files
                // (outside the build's folder: Landlock refuses it); ask for none.
                .arg("-fno-crash-diagnostics")
                .arg(step);
            cmd
        };
        // A `.S` is preprocessed and assembled by two clang calls of one job each: clang runs a
        // lone job in its own process, while `clang -c x.S` starts two more (the preprocessor,
        // then the assembler), each loading libLLVM again. The assembler reads the line markers
        // of the preprocessed text, so its messages still name `x.S` and its lines.
        let src = if src.extension().is_some_and(|x| x == "S") {
            let pre = obj.with_extension("s");
            run(variant, user, may, clang_for("-E").arg("-I").arg(&include).arg("-o").arg(&pre).arg(src))?;
            std::borrow::Cow::Owned(pre)
        } else {
            std::borrow::Cow::Borrowed(src)
        };
        run(variant, user, may, clang_for("-c").arg("-o").arg(obj).arg(&*src))
    };
    let mut kernel_objects = Vec::new();
    for (i, src) in inputs.sources.iter().enumerate() {
        let obj =
            tmp_dir.join(format!("{i}-{}", src.file_stem().unwrap_or_default().to_string_lossy())).with_extension("o");
        assemble(src, &obj, variant.march, &inputs.clang_flags, &sources_may, Some(src))?;
        kernel_objects.push(obj);
    }
    let undefined = check_objects(variant, &inputs, &kernel_objects)?;
    // The driver and the mark are the lab's: a user's kernel gets them assembled for the arch's
    // base ISA (the driver saves the FP registers whatever the kernel declares), plus a vector
    // extension whose state the driver sets at entry (RVV: vtype.vill, vxrm).
    let driver_march = driver_march(variant);
    let lab_object = LabObject { cache_dir: &cfg.cache_dir, staging: &tmp_dir, variant, march: driver_march };
    let mark_o = lab_object.get("lab_kernel_data_end", KERNEL_DATA_MARK.as_bytes(), &header, |obj| {
        let mark = tmp_dir.join("lab_kernel_data_end.s");
        std::fs::write(&mark, KERNEL_DATA_MARK).map_err(io(&mark))?;
        assemble(&mark, obj, driver_march, &[], &lab_may, None)
    })?;
    let driver_text = std::fs::read(&driver).map_err(io(&driver))?;
    let driver_o = lab_object
        .get("lab_driver", &driver_text, &header, |obj| assemble(&driver, obj, driver_march, &[], &lab_may, None))?;
    let tmp_elf = tmp_dir.join("lab.elf");
    let mut link = Command::new(&lld);
    link.args(["-static", "-nostdlib", "-e", "_start", "-o"]).arg(&tmp_elf);
    for (contract, user) in &inputs.aliases {
        link.arg(format!("--defsym={}{contract}={user}", crate::protocol::ENTRY_PREFIX));
    }
    // `-u`: pull the archive members that define the contract symbols (nothing else refers to them).
    for symbol in undefined {
        link.arg("-u").arg(symbol);
    }
    link.args(&kernel_objects).args(&inputs.objects).arg(&mark_o).arg(&driver_o);
    // ld.lld reads the objects it is given (the user's by their own paths, the lab's from the
    // cache) and writes the image.
    let link_may = Grants {
        files: inputs.objects.clone(),
        trees: vec![cfg.cache_dir.join("objects")],
        scratch: Some(tmp_dir.clone()),
        ..Grants::default()
    };
    run(variant, None, &link_may, &mut link)?;
    crate::cache_seal::seal(&tmp_elf).map_err(io(&tmp_elf))?;
    // Rename the whole folder into place so a half-built image is never taken from the cache;
    // if another build won the race, its identical image is used.
    let tmp_dir = tmp.keep();
    if std::fs::rename(&tmp_dir, &out_dir).is_err() && !crate::cache_seal::usable(&elf) {
        // A folder without a sound image (one whose seal failed) is in the way: replace it.
        let _ = std::fs::remove_dir_all(&out_dir);
        if std::fs::rename(&tmp_dir, &out_dir).is_err() && !elf.is_file() {
            return Err(io(&out_dir)(std::io::Error::other("could not move the built image into the cache")));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp_dir);
    Ok(elf)
}

/// Proves from scratch that the toolchain builds for `variant`: assembles a tiny source (the
/// kernel-data mark the lab links into every image) with the variant's target, `-march` and
/// flags, and links it with ld.lld, in a fresh temporary folder. `lab doctor` runs it for each
/// variant, so a clang without the target or the `-march`, or a broken ld.lld, is found even
/// when every image comes from the cache.
///
/// # Errors
/// A missing tool (naming its Debian package), an I/O error, or clang's or ld.lld's message.
pub fn probe(variant: &Variant) -> Result<(), ToolchainError> {
    let clang = find(CLANG)?;
    let lld = find(LLD)?;
    let dir = tempfile::Builder::new().prefix("lab-probe-").tempdir().map_err(io(&std::env::temp_dir()))?;
    // `.s`: plain assembly, one process fewer than `.S` (no preprocessor run).
    let (src, obj, elf) = (dir.path().join("probe.s"), dir.path().join("probe.o"), dir.path().join("probe.elf"));
    std::fs::write(&src, KERNEL_DATA_MARK).map_err(io(&src))?;
    // Confined as real builds are, so a toolchain that needs more than they allow shows here.
    let may = Grants { scratch: Some(dir.path().to_path_buf()), ..Grants::default() };
    run(
        variant,
        None,
        &may,
        Command::new(&clang)
            .arg(format!("--target={}", variant.arch.spec().clang_triple))
            .arg(format!("-march={}", variant.march))
            .args(variant.arch.spec().clang_flags)
            .arg("-c")
            .arg("-o")
            .arg(&obj)
            .arg(&src),
    )?;
    run(
        variant,
        None,
        &may,
        Command::new(&lld).args(["-static", "-nostdlib", "-e", "lab_kernel_text_end", "-o"]).arg(&elf).arg(&obj),
    )
}

/// The lab's own objects of one image build (the kernel-data mark, the driver): the same for
/// every image of a target and `-march` with one protocol header, so each is assembled once
/// into `<cache>/objects/`, named by a hash of what decides it (target, `-march`, the arch's
/// clang flags, the header and the source text), and linked into every image from there.
struct LabObject<'a> {
    cache_dir: &'a Path,
    /// The build's private folder (same file system as the cache: objects are renamed out of it).
    staging: &'a Path,
    variant: &'a Variant,
    march: &'a str,
}

impl LabObject<'_> {
    /// The cached object `name` assembled from `text`, made by `assemble` (given the path to
    /// write) when the cache has none.
    fn get(
        &self,
        name: &str,
        text: &[u8],
        header: &str,
        assemble: impl FnOnce(&Path) -> Result<(), ToolchainError>,
    ) -> Result<PathBuf, ToolchainError> {
        let spec = self.variant.arch.spec();
        let mut h = Sha256::new();
        let flags = spec.clang_flags.join(" ");
        for part in [spec.clang_triple.as_bytes(), self.march.as_bytes(), flags.as_bytes(), header.as_bytes(), text] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        let mut key = String::new();
        for b in &h.finalize()[..8] {
            let _ = write!(key, "{b:02x}");
        }
        let dir = self.cache_dir.join("objects");
        let path = dir.join(format!("{}-{name}-{key}.o", self.variant.arch.name()));
        if crate::cache_seal::usable(&path) {
            return Ok(path);
        }
        let staged = self.staging.join(format!("{name}.o"));
        assemble(&staged)?;
        crate::cache_seal::seal(&staged).map_err(io(&staged))?;
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        // Renamed into place whole (the seal first), so a half-written object is never taken;
        // a concurrent build's identical object may replace it.
        let seal = crate::cache_seal::seal_path(&path);
        std::fs::rename(crate::cache_seal::seal_path(&staged), &seal).map_err(io(&seal))?;
        std::fs::rename(&staged, &path).map_err(io(&path))?;
        Ok(path)
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ToolchainError {
    let path = path.to_path_buf();
    move |source| ToolchainError::Io { path, source }
}

/// The folders whose regular files the kernel sources of `variant` may read: the kernels
/// folder `<kernels_dir>/<arch>/`, or each folder holding a source of the user's kernel.
fn source_folders(cfg: &BuildConfig, variant: &Variant, inputs: &Inputs) -> Vec<PathBuf> {
    if user_kernel::of(variant).is_none() {
        return vec![cfg.kernels_dir.join(variant.arch.name())];
    }
    let mut folders: Vec<PathBuf> = inputs.sources.iter().filter_map(|s| s.parent()).map(Path::to_path_buf).collect();
    folders.sort();
    folders.dedup();
    folders
}

/// The lab's own variant of `arch` without extensions (its `-march` assembles the driver).
fn base_variant(arch: Arch) -> &'static Variant {
    crate::variant::VARIANTS.iter().find(|v| v.arch == arch && !v.zbb).unwrap_or(&crate::variant::VARIANTS[0])
}

/// The `-march` the driver and the mark of `variant`'s image are assembled with: a user's
/// kernel's [`driver_variant`], the lab's own variant's own.
fn driver_march(variant: &Variant) -> &'static str {
    if variant.custom.is_some() {
        driver_variant(variant).march
    } else {
        variant.march
    }
}

/// The lab's own variant whose `-march` assembles the driver of a user's `variant`: the arch's
/// base, or the base with the vector extension when the driver sets that extension's state at
/// each call ([`crate::arch::VectorLengthSpec::unconfigured`]).
fn driver_variant(variant: &Variant) -> &'static Variant {
    // The ISA qemu runs (a dispatch path's own), so the driver never uses V on a CPU without it.
    let runs: &[&str] = crate::user_kernel::of(variant).map_or(variant.extensions, |k| &k.isa.extensions);
    let vector: Vec<&str> = match crate::user_kernel::vector_length(variant) {
        Some(vl) if vl.unconfigured.is_some() => vl.extensions.iter().copied().filter(|e| runs.contains(e)).collect(),
        _ => Vec::new(),
    };
    let own = crate::variant::VARIANTS.iter().find(|v| v.arch == variant.arch && v.extensions == vector.as_slice());
    own.unwrap_or_else(|| base_variant(variant.arch))
}

/// Checks the prebuilt objects and the assembled sources together (`objects::select`) and
/// returns the symbols to pull from archives with `-u`: the user's name for each contract (or
/// the contract name itself when none is mapped).
fn check_objects(variant: &Variant, inputs: &Inputs, compiled: &[PathBuf]) -> Result<Vec<String>, ToolchainError> {
    let fail = |e: ObjectError| ToolchainError::Object { variant: variant.name.to_string(), source: e };
    let mut always = Vec::new();
    let mut archives = Vec::new();
    // Sources the lab assembles keep their old rules (their data is mapped read-only during
    // calls and findings name it; ld.lld names what they leave undefined): only their symbols count.
    for path in compiled {
        let (units, _) = objects::read(path, variant.arch).map_err(fail)?;
        always.extend(units.into_iter().map(|u| objects::Unit { refused: None, undefined: Vec::new(), ..u }));
    }
    for path in &inputs.objects {
        let (units, is_archive) = objects::read(path, variant.arch).map_err(fail)?;
        if is_archive {
            archives.push(units);
        } else {
            always.extend(units);
        }
    }
    let mut pulled: Vec<String> = inputs.required.iter().map(|(_, u)| u.clone()).collect();
    if inputs.contract_names {
        let mapped = |c: &str| inputs.required.iter().any(|(m, _)| m == c);
        let contracts = crate::user_kernel::contract_symbols().into_iter().map(|(s, _)| s);
        pulled.extend(contracts.filter(|c| !mapped(c)).map(str::to_string));
    }
    let in_archives = |s: &String| archives.iter().flatten().any(|u| u.defined.iter().any(|(d, _)| d == s));
    pulled.retain(in_archives);
    let mut wanted = inputs.required.clone();
    for s in pulled.iter().filter(|s| !inputs.required.iter().any(|(_, u)| u == *s)) {
        wanted.push((s.clone(), s.clone()));
    }
    objects::select(always, archives, &wanted).map_err(fail)?;
    Ok(pulled)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quoted path that exists is taken as refused (made absolute); one that does not, a
    /// note line, or a path clang could not find beside the source (`.incbin` searches the
    /// working folder) is not.
    #[test]
    fn refused_paths_are_the_quoted_ones_that_exist() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("evil.S");
        std::fs::write(dir.path().join("beside.inc"), "").unwrap();
        let stderr = "evil.S:3:9: error: Could not find incbin file '/etc/passwd'\n\
                      evil.S:4:9: error: Could not find incbin file '/no/such/file'\n\
                      evil.S:5:9: error: Could not find incbin file 'beside.inc'\n\
                      evil.S:6:9: note: while reading '/etc/hostname'\n";
        assert_eq!(refused_paths(stderr, Some(&src)), vec![PathBuf::from("/etc/passwd")]);
        let stderr = "evil.S:3:10: fatal error: cannot open file 'beside.inc': Permission denied\n";
        assert_eq!(refused_paths(stderr, Some(&src)), vec![dir.path().join("beside.inc")]);
    }
}
