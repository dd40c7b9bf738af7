//! A shrunk failure written as a vector file, with the `lab run` line that replays it.

use super::{blocks_of, Failure, FuzzConfig, Outcome, Shrunk};
use crate::backend::{self};
use crate::variant::{Kernel, Variant};

/// Why a target stops after SIGINT/SIGTERM (lab/src/interrupt.rs).
pub(super) fn interrupted_reason() -> Option<String> {
    crate::interrupt::interrupted().map(|s| format!("interrupted by {}", crate::interrupt::name(s)))
}

/// The replay options of a campaign with `seed` on the kernels in `kernels_dir`: `--kernels-dir`
/// when they are not the repository's, so that a printed command reproduces it.
pub(super) fn replay_options(seed: u64, kernels_dir: &std::path::Path, variant: &Variant) -> crate::replay::Replay {
    let mut replay = crate::replay::Replay::new(seed);
    match crate::user_kernel::of(variant) {
        // A user's kernel: the options that select it (--manifest/--variant or --object/--symbol/--isa).
        Some(k) => k.replay.iter().for_each(|(name, value)| {
            replay.value(name, value.clone());
        }),
        None if kernels_dir != crate::paths::kernels_dir() => {
            replay.path("--kernels-dir", kernels_dir);
        }
        None => {}
    }
    if crate::domain::current() != crate::domain::Domain::Jdk {
        replay.value("--domain", crate::domain::current().name());
    }
    replay
}

/// The `lab run` line that replays a shrunk failure of `variant` saved in `file`.
pub(super) fn replay_line(
    seed: u64,
    kernels_dir: &std::path::Path,
    variant: &Variant,
    (backend, vl): (backend::BackendKind, Option<crate::arch::VectorLength>),
    kernel: Kernel,
    (file, partial): (&std::path::Path, backend::PartialLoads),
) -> String {
    let mut replay = replay_options(seed, kernels_dir, variant);
    replay.flag("--no-bundled").path("--vectors", file);
    if partial == backend::PartialLoads::Fail {
        replay.value("--partial-loads", "fail");
    }
    replay.narrowed_at(variant.name, backend, vl, kernel, None, None)
}

/// Writes a piece's shrunk failure as a vector file and builds the outcome with its replay
/// command.
pub(super) fn write_failure(
    cfg: &FuzzConfig,
    variant: &'static Variant,
    (backend, vl): (backend::BackendKind, Option<crate::arch::VectorLength>),
    kernel: Kernel,
    shrunk: Shrunk,
) -> Outcome {
    let Shrunk { case_index, original_blocks, mut case, findings, stopped } = shrunk;
    let on = crate::run::backend_label(backend, vl);
    case.name = format!("fuzz seed {} case {case_index} on {}/{on} (shrunk)", cfg.seed, variant.name);
    let mut options = replay_options(cfg.seed, &cfg.build.kernels_dir, variant);
    if cfg.limits.partial_loads == backend::PartialLoads::Fail {
        options.value("--partial-loads", "fail");
    }
    let campaign = options.fuzz_target(variant.name, backend, kernel);
    let campaign = match vl {
        Some(vl) => format!("{campaign} --vlen {}", vl.bits),
        None => campaign,
    };
    case.source = format!(
        "{campaign}: case {case_index}, shrunk from {original_blocks} to {} blocks{}; expected values from the portable reference",
        blocks_of(&case),
        if stopped { " (shrinking stopped at the --time deadline: maybe not minimal)" } else { "" }
    );
    let at = vl.map(|vl| format!("-{}{}", vl.spec.name.to_lowercase().replace(' ', "-"), vl.bits)).unwrap_or_default();
    let file = cfg.out_dir.join(format!(
        "fuzz-{}-{backend}{at}-{kernel}-seed{}.json",
        variant.name.replace('+', "_"),
        cfg.seed
    ));
    let written = std::fs::create_dir_all(&cfg.out_dir).and_then(|()| {
        crate::vectors::write_file(
            &file,
            kernel,
            "fuzz-regressions",
            "shrunk lab fuzz failures",
            std::slice::from_ref(&case),
        )
    });
    if let Err(e) = written {
        return Outcome::Error(format!("{}: cannot write the failing case: {e}", file.display()));
    }
    let replay = replay_line(
        cfg.seed,
        &cfg.build.kernels_dir,
        variant,
        (backend, vl),
        kernel,
        (&file, cfg.limits.partial_loads),
    );
    Outcome::Failed(Box::new(Failure { case_index, original_blocks, case, findings, file, replay }))
}

#[cfg(test)]
mod tests {
    use super::replay_line;
    use crate::backend::BackendKind;
    use crate::variant::{Kernel, Variant};

    /// A shrunk failure's replay keeps the variant's Zbb choice (riscv64 and riscv64+zbb
    /// share `--arch riscv64`), the kernels folder and the saved file.
    #[test]
    fn the_replay_of_a_failure_names_zbb_the_kernels_and_the_file() {
        let zbb = Variant::by_name("riscv64+zbb").expect("riscv64+zbb");
        let kernels = std::path::Path::new("/tmp/my kernels");
        let line = replay_line(
            9,
            kernels,
            zbb,
            (BackendKind::Qemu, None),
            Kernel::Md5,
            (std::path::Path::new("/f/x.json"), Default::default()),
        );
        assert!(
            line.ends_with(
                "lab run --seed 9 --kernels-dir '/tmp/my kernels' --no-bundled --vectors /f/x.json --arch riscv64 --zbb \
                 --backend qemu --kernel md5"
            ),
            "{line}"
        );
    }
}
