//! What the lab knows of an image before any backend runs it: the static scans (ISA, system
//! calls), contract symbols it lacks, and kernels a user's image does not provide.

use super::RunConfig;
use crate::backend::BackendKind;
use crate::cases::plan::Stubs;
use crate::finding::{Class, Finding};
use crate::image::Image;
use crate::isa;
use crate::report::ImageFinding;
use crate::variant::{Kernel, Variant};
use crate::vectors::VectorSet;

/// What the static scans found in one image, before any backend runs it.
pub(super) struct Scan {
    /// Image findings (ISA, system calls, missing contract symbols), in report order.
    pub(super) findings: Vec<ImageFinding>,
    /// Set-up errors of the scan itself.
    pub(super) errors: Vec<String>,
    /// Whether the kernels' code holds instructions Unicorn cannot execute
    /// ([`isa::unicorn_stops`]): calls that reach one are not run past it there.
    pub(super) unicorn_stops: bool,
    /// Warnings about the image (`abi-upper-bits` under the `warn` policy).
    pub(super) warnings: Vec<String>,
}

impl Scan {
    pub(super) fn of(cfg: &RunConfig, variant: &'static Variant, image: &Image, sets: &[VectorSet]) -> Scan {
        let (mut findings, errors) = scan_image(variant, image);
        let unicorn_stops = isa::unicorn_stops(image, variant.extensions).is_ok_and(|s| !s.is_empty());
        let selected: Vec<Kernel> =
            cfg.kernels.iter().copied().filter(|k| sets.iter().any(|s| s.kernel == *k)).collect();
        let provided: Vec<Kernel> = selected.into_iter().filter(|&k| not_provided(variant, k).is_none()).collect();
        findings.extend(missing_symbols(variant, image, &provided));
        let mut scan = Scan { findings, errors, unicorn_stops, warnings: Vec::new() };
        if let Ok(Some(why)) = isa::unset_rounding(image) {
            scan.warnings.push(format!("{variant}: {why}"));
        }
        scan.probe_upper_bits(cfg, variant, image, &provided);
        scan
    }

    /// The `abi-upper-bits` probe ([`crate::abi_probe`]) of each kernel, on the first backend
    /// of the run that can run the image (not Unicorn when a probe call could stop at an
    /// instruction it cannot execute): a warning per argument the kernel reads whole.
    fn probe_upper_bits(&mut self, cfg: &RunConfig, variant: &'static Variant, image: &Image, kernels: &[Kernel]) {
        let usable =
            |k: &BackendKind| k.supports(variant).is_ok() && !(*k == BackendKind::Unicorn && self.unicorn_stops);
        let Some(kind) = cfg.backends.iter().copied().find(usable) else { return };
        let entry = Stubs::of(image);
        let wanted: Vec<Kernel> = kernels.iter().copied().filter(|&k| entry.missing(k).is_none()).collect();
        if wanted.is_empty() {
            return;
        }
        let Ok(mut backend) = kind.open(variant, image, cfg.limits) else { return };
        for k in wanted {
            match crate::int_args::reliance(backend.as_mut(), image, k) {
                Ok(found) => self
                    .warnings
                    .extend(found.iter().map(|f| crate::upper_bits_report::warning(variant.name, k, kind, f))),
                Err(e) => self.errors.push(format!("{variant}: the {k} upper-bits probe on {kind} could not run: {e}")),
            }
        }
    }
}

/// Why a user's kernel has no `kernel` to run, if it has none: its manifest entry (or
/// `--symbol` options) maps no symbol of that kernel's contracts, or, with nothing mapped, its
/// objects define none ([`crate::user_kernel::UserKernel::lacks`]).
pub fn not_provided(variant: &Variant, kernel: Kernel) -> Option<String> {
    crate::user_kernel::of(variant)?.lacks(kernel)
}

/// One finding per contract symbol of a selected kernel that `image` does not define, for
/// kernels no contract family ([`crate::contract::family_of`]) is complete for (the symbols of
/// [`crate::contract::intended_family`]): a kernels folder without `poly1305.S`, or with `md5_implCompressMB` misspelt,
/// fails its variant instead of passing with the kernel's cases skipped. Names the closest
/// symbol the image does define, when one is close (edit distance at most 3, or equal ignoring
/// case).
pub fn missing_symbols(variant: &'static Variant, image: &Image, kernels: &[Kernel]) -> Vec<ImageFinding> {
    let mut out = Vec::new();
    let defined = |s: &str| image.entry(s).is_some();
    for &kernel in kernels.iter().filter(|&&k| crate::contract::family_of(k, defined).is_none()) {
        // A misspelt OpenSSL name (`poly1305_blocs`) still points at the OpenSSL family.
        let near = |s: &str| image.symbol_names().any(|n| strsim::levenshtein(n, s) <= 3 || n.eq_ignore_ascii_case(s));
        let family = crate::contract::intended_family(kernel, |s| defined(s) || near(s));
        for symbol in crate::contract::contracts(family, kernel)
            .filter(|c| c.required())
            .map(|c| c.symbol)
            .filter(|s| !defined(s))
        {
            let near = image
                .symbol_names()
                .map(|n| (strsim::levenshtein(n, symbol), n))
                .filter(|&(d, n)| d <= 3 || n.eq_ignore_ascii_case(symbol))
                .min()
                .map(|(_, n)| format!("; the image defines `{n}`: misspelt?"))
                .unwrap_or_default();
            let text = format!(
                "the {kernel} kernel's contract symbol `{symbol}` is missing from {} (its {kernel} cases cannot run){near}",
                image.path.display()
            );
            out.push(ImageFinding { variant: variant.name, finding: Finding::new(Class::MissingSymbol, text) });
        }
    }
    out
}

/// The static ISA and system-call scan of `image` ([`isa::scan`]) and its stack-pointer
/// alignment scan ([`crate::align::sp_scan`], class abi): one image finding per violation,
/// and set-up errors of the scan itself. Shared by `lab run` and `lab fuzz`.
pub fn scan_image(variant: &'static Variant, image: &Image) -> (Vec<ImageFinding>, Vec<String>) {
    let (findings, errors) = match isa::scan(image, variant) {
        Ok(violations) => (
            violations
                .into_iter()
                .map(|v| {
                    let class = if v.why.starts_with("a system call") { Class::Syscall } else { Class::Isa };
                    ImageFinding { variant: variant.name, finding: Finding::new(class, v.to_string()) }
                })
                .collect(),
            Vec::new(),
        ),
        Err(e) => (Vec::new(), vec![format!("{variant}: ISA scan: {e}")]),
    };
    // The static sp-alignment check (qemu and native cannot see a misaligned sp; align.rs).
    let mut findings = findings;
    let sp = crate::align::sp_scan(image).unwrap_or_default().into_iter();
    findings
        .extend(sp.map(|v| ImageFinding { variant: variant.name, finding: Finding::new(Class::Abi, v.to_string()) }));
    (findings, errors)
}
