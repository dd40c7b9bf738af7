//! Shared fixtures: the repository's paths, a run configuration for one cell of the matrix,
//! and a copy of the kernels with one line changed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kernel_lab::backend::{BackendKind, Limits};
use kernel_lab::batch::Placement;
use kernel_lab::image::Image;
use kernel_lab::paths;
use kernel_lab::report::Row;
use kernel_lab::run::RunConfig;
use kernel_lab::toolchain::{self, BuildConfig};
use kernel_lab::variant::{Kernel, Variant};
use kernel_lab::vectors::{self, Vector, VectorSet};

/// Fixed seed so a failure can be replayed with `lab run --seed 7`.
pub const SEED: u64 = 7;

pub fn variant(name: &str) -> &'static Variant {
    Variant::by_name(name).unwrap_or_else(|| panic!("no variant {name}"))
}

/// The lab's variants `lab bench` counts: those Unicorn runs (counts are measured there; the
/// AVX2, AVX-512 and SVE2 rows are skipped with the reason).
pub fn counted_variants() -> Vec<&'static Variant> {
    kernel_lab::variant::VARIANTS.iter().filter(|v| BackendKind::Unicorn.supports(v).is_ok()).collect()
}

pub fn build(v: &Variant) -> Image {
    let path = toolchain::build_image(&toolchain::default_build(), v).unwrap_or_else(|e| panic!("{e}"));
    Image::load(&path, v.arch).unwrap_or_else(|e| panic!("{e}"))
}

/// Budgets for runs of broken fixtures: a hang or a loop fails in seconds.
pub const FIXTURE_LIMITS: Limits = Limits {
    batch_time: Duration::from_secs(5),
    call_instructions: 1_000_000,
    partial_loads: kernel_lab::backend::PartialLoads::Warn,
    witness: true,
};

/// `v` built from the kernels of `cfg` (a fixture folder); `what` names the fixture in a failure.
pub fn fixture_image(cfg: &BuildConfig, v: &Variant, what: &str) -> Image {
    let path = toolchain::build_image(cfg, v).unwrap_or_else(|e| panic!("{what}: {e}"));
    Image::load(&path, v.arch).expect("image")
}

/// The bundled vector file `file` (e.g. `md5/rfc1321.json`) cut down to its first vector that
/// `keep` accepts: a set of one vector, for fast fixture runs.
pub fn one_vector_set(file: &str, keep: impl Fn(&Vector) -> bool) -> VectorSet {
    let (set, errors) = vectors::load_file(&paths::vectors_dir().join(file));
    assert!(errors.is_empty(), "{errors:?}");
    let mut set = set.unwrap_or_else(|| panic!("{file}"));
    let v = set.vectors.iter().find(|v| keep(v)).unwrap_or_else(|| panic!("no such vector in {file}")).clone();
    set.vectors = vec![v];
    set
}

/// Runs `set` on backend `kind` with [`FIXTURE_LIMITS`], the guarded cases' inputs at the end
/// of their pages: the row.
pub fn run_fixture_set(kind: BackendKind, v: &'static Variant, image: &Image, set: &VectorSet) -> Row {
    let mut backend = kind.open(v, image, FIXTURE_LIMITS).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let progress = &mut kernel_lab::progress::ignore;
    kernel_lab::run::run_set_with_progress(backend.as_mut(), v, image, set, SEED, Placement::End, progress)
}

pub fn config(v: &'static Variant, backend: BackendKind, kernel: Kernel) -> RunConfig {
    let files = vectors::bundled_files(&paths::vectors_dir(), &[kernel]);
    config_with(v, vec![backend], kernel, files, toolchain::default_build())
}

/// A run of `kernel` on one variant with the given backends, vector files and kernel sources.
pub fn config_with(
    v: &'static Variant,
    backends: Vec<BackendKind>,
    kernel: Kernel,
    vector_files: Vec<PathBuf>,
    build: BuildConfig,
) -> RunConfig {
    RunConfig {
        variants: vec![v],
        backends,
        kernels: vec![kernel],
        vector_files,
        build,
        seed: SEED,
        limits: Limits::default(),
        flush: Placement::End,
        vector_lengths: Vec::new(),
        filter: kernel_lab::run::Filter::default(),
        cost_limits: Default::default(),
        jobs: 0,
    }
}

/// Builds from the kernels copied into `dir`, into the lab's shared image cache
/// ([`paths::cache_dir`]): images are keyed by a hash of every file of the architecture's folder
/// (lab/src/toolchain.rs), so a fixture's image never stands in for another's, and a suite run
/// after the first builds no fixture again.
pub fn fixture_build(dir: &Path) -> BuildConfig {
    BuildConfig { kernels_dir: dir.to_path_buf(), cache_dir: paths::cache_dir() }
}

/// A copy of `kernels/` in a temporary folder with `<arch>/<file>` replaced by the fixture
/// `tests/fixtures/<arch>/<fixture>`; the original is kept as `<arch>/real_<stem>.inc` for
/// fixtures that wrap it (tests/fixtures/README.md). Builds into the shared cache ([`fixture_build`]).
pub fn fixture_kernels(arch: &str, file: &str, fixture: &str) -> (tempfile::TempDir, BuildConfig) {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(&paths::kernels_dir(), dir.path());
    let target = dir.path().join(arch).join(file);
    let stem = file.strip_suffix(".S").expect("a .S file");
    std::fs::rename(&target, dir.path().join(arch).join(format!("real_{stem}.inc"))).expect("keep the original");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(arch).join(fixture);
    std::fs::copy(&src, &target).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    // The tamper fixtures' shared sequence, #included beside the fixture.
    let shared = src.with_file_name(HOSTILE_INC);
    if shared.exists() {
        std::fs::copy(&shared, dir.path().join(arch).join(HOSTILE_INC)).expect("copy hostile.inc");
    }
    let build = fixture_build(dir.path());
    (dir, build)
}

/// The include of each architecture's tamper fixtures (tests/fixtures/<arch>/hostile.inc).
const HOSTILE_INC: &str = "hostile.inc";

/// Like [`fixture_kernels`], with the fixture's text given (a generated fixture).
pub fn generated_fixture_kernels(arch: &str, file: &str, source: &str) -> (tempfile::TempDir, BuildConfig) {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(&paths::kernels_dir(), dir.path());
    let target = dir.path().join(arch).join(file);
    let stem = file.strip_suffix(".S").expect("a .S file");
    std::fs::rename(&target, dir.path().join(arch).join(format!("real_{stem}.inc"))).expect("keep the original");
    std::fs::write(&target, source).expect("write the fixture");
    let build = fixture_build(dir.path());
    (dir, build)
}

/// A copy of `kernels/` in a temporary folder with `from` replaced by `to` (exactly once) in
/// `<arch>/<file>`, and a build configuration that builds from it ([`fixture_build`]).
pub fn mutated_kernels(arch: &str, file: &str, from: &str, to: &str) -> (tempfile::TempDir, BuildConfig) {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(&paths::kernels_dir(), dir.path());
    let path = dir.path().join(arch).join(file);
    let src = std::fs::read_to_string(&path).expect("kernel source");
    assert_eq!(src.matches(from).count(), 1, "{from:?} must occur once in {}", path.display());
    std::fs::write(&path, src.replacen(from, to, 1)).expect("write mutated kernel");
    let build = fixture_build(dir.path());
    (dir, build)
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).expect("read kernels") {
        let e = e.expect("entry");
        let target: PathBuf = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// A vector file `mine.json` with one valid MD5 entry and one (entry 1, "typo") whose
/// `msg_hex` is not hex. Keep the folder alive while the file is used.
pub fn vector_file_with_a_typo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("mine.json");
    std::fs::write(
        &file,
        r#"{"kernel":"md5","set":"mine","vectors":[
            {"name":"ok","source":"RFC 1321 A.5","msg_hex":"616263","digest_hex":"900150983cd24fb0d6963f7d28e17f72"},
            {"name":"typo","source":"hand","msg_hex":"61zz","digest_hex":"900150983cd24fb0d6963f7d28e17f72"}]}"#,
    )
    .expect("write vector file");
    (dir, file)
}

/// `lab run --format json --seed 26 ARGS`: (exit code, the report).
pub fn lab_json(args: &[&str]) -> (i32, serde_json::Value) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", kernel_lab::paths::cache_dir())
        .args(["run", "--format", "json", "--seed", "26"])
        .args(args)
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    });
    (out.status.code().expect("exit status"), json)
}

/// (passed, failed, skip reason) of every row of `variant` on `backend` in a JSON report,
/// summed.
pub fn row(report: &serde_json::Value, variant: &str, backend: &str) -> (u64, u64, String) {
    let mut out = (0, 0, String::new());
    for r in report["rows"].as_array().expect("rows") {
        if r["variant"] == variant && r["backend"] == backend {
            out.0 += r["passed"].as_u64().unwrap_or(0);
            out.1 += r["failed"].as_u64().unwrap_or(0);
            if let Some(s) = r["skip_reason"].as_str() {
                out.2 = s.to_owned();
            }
        }
    }
    out
}

/// Whether this host's CPU has `flag` (/proc/cpuinfo, Linux's names).
pub fn host_has(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.split_whitespace().any(|w| w == flag))
}
