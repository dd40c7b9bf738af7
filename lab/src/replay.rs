//! The one place that writes the command line replaying a run, a row or a case. Every report
//! (human, JUnit, `lab fuzz`'s text and the vector files it writes) prints lines built here, so
//! a replay carries every option that decides the findings: the seed, `--kernels-dir`,
//! `--vectors`, `--no-bundled`, `--flush`, the budgets, `$KERNEL_LAB_ROOT`, and the row's
//! variant (`--zbb`/`--no-zbb` included), backend, kernel and set. Set, case and user variant
//! names are written in their exact form (`--set '=rfc1321'`, [`crate::filter`]): the line selects
//! that name only, never another that contains it.

use std::path::Path;

use crate::arch::VectorLength;
use crate::backend::BackendKind;
use crate::variant::{Kernel, Variant};

/// The run-wide part of a replay: the command and the options that apply to every row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replay {
    /// `$KERNEL_LAB_ROOT` of the run, if set (it changes which kernels and vectors ran).
    pub root: Option<String>,
    /// The seed (`--seed`).
    pub seed: u64,
    /// Options and their values in order, e.g. `("--kernels-dir", Some(path))`,
    /// `("--no-bundled", None)`; paths absolute so the line works from any folder.
    pub options: Vec<(String, Option<String>)>,
}

impl Replay {
    /// A replay of a run with `seed`, `$KERNEL_LAB_ROOT` taken from the environment.
    pub fn new(seed: u64) -> Replay {
        let root = std::env::var_os("KERNEL_LAB_ROOT").map(|r| r.to_string_lossy().into_owned());
        Replay { root, seed, options: Vec::new() }
    }

    /// Adds an option without a value.
    pub fn flag(&mut self, name: &str) -> &mut Self {
        self.options.push((name.into(), None));
        self
    }

    /// Adds an option and its value.
    pub fn value(&mut self, name: &str, value: impl Into<String>) -> &mut Self {
        self.options.push((name.into(), Some(value.into())));
        self
    }

    /// Adds an option whose value is a path, made absolute.
    pub fn path(&mut self, name: &str, path: &Path) -> &mut Self {
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        self.value(name, abs.to_string_lossy())
    }

    /// `lab run` narrowed to one variant × backend × kernel and, if given, one vector set and
    /// one case.
    pub fn narrowed(
        &self,
        variant: &str,
        backend: BackendKind,
        kernel: Kernel,
        set: Option<&str>,
        case: Option<&str>,
    ) -> String {
        self.line("run", variant, Some((backend, kernel)), set, case)
    }

    /// [`narrowed`](Self::narrowed) at one vector length (`--vlen 256`) when the row has one.
    pub fn narrowed_at(
        &self,
        variant: &str,
        backend: BackendKind,
        vector_length: Option<VectorLength>,
        kernel: Kernel,
        set: Option<&str>,
        case: Option<&str>,
    ) -> String {
        let line = self.narrowed(variant, backend, kernel, set, case);
        match vector_length {
            Some(vl) => format!("{line} --vlen {}", vl.bits),
            None => line,
        }
    }

    /// `lab run` narrowed to one variant, every backend and kernel of the run: what replays a
    /// finding about the variant's image (the static scans run whatever the backend).
    pub fn variant(&self, variant: &str) -> String {
        self.line("run", variant, None, None, None)
    }

    /// `lab fuzz` narrowed to one variant × backend × kernel: the campaign of one target.
    pub fn fuzz_target(&self, variant: &str, backend: BackendKind, kernel: Kernel) -> String {
        self.line("fuzz", variant, Some((backend, kernel)), None, None)
    }

    fn line(
        &self,
        command: &str,
        variant: &str,
        target: Option<(BackendKind, Kernel)>,
        set: Option<&str>,
        case: Option<&str>,
    ) -> String {
        let mut words: Vec<String> = Vec::new();
        if let Some(root) = &self.root {
            words.push(format!("KERNEL_LAB_ROOT={}", quote(root)));
        }
        words.extend(["lab", command, "--seed"].map(String::from));
        words.push(self.seed.to_string());
        for (name, value) in &self.options {
            words.push(name.clone());
            words.extend(value.as_deref().map(quote));
        }
        // `--arch` (and the Zbb switch) names one lab row only where no vector row shares them.
        let shared =
            |v: &Variant| crate::variant::VARIANTS.iter().filter(|o| o.arch == v.arch && o.zbb == v.zbb).count();
        match Variant::by_name(variant) {
            // `--arch --[no-]zbb` names one scalar riscv64 row; a vector row, or a row that shares
            // `--arch` with others where there is no Zbb switch (x86_64+avx2), by its exact name.
            Some(v)
                if v.vector_length().is_some() || (v.arch.spec().isa.extension("zbb").is_none() && shared(v) > 1) =>
            {
                words.push(format!("--variant {}", quote(&format!("={}", v.name))))
            }
            Some(v) if v.arch.spec().isa.extension("zbb").is_some() => {
                words.extend([format!("--arch {}", v.arch), format!("--{}zbb", if v.zbb { "" } else { "no-" })])
            }
            Some(v) => words.push(format!("--arch {}", v.arch)),
            // A user's kernel (manifest or --object): its variant by name.
            None if !self.options.iter().any(|(n, _)| n == "--variant") => {
                words.push(format!("--variant {}", quote(&format!("={variant}"))))
            }
            None => {}
        }
        if let Some((backend, kernel)) = target {
            words.push(format!("--backend {backend} --kernel {kernel}"));
        }
        if let Some(set) = set {
            words.push(format!("--set {}", quote(&format!("={set}"))));
        }
        if let Some(case) = case {
            words.push(format!("--case {}", quote(&format!("={case}"))));
        }
        words.join(" ")
    }
}

/// `s` as one shell word (quoted only when it needs to be).
fn quote(s: &str) -> String {
    shlex::try_quote(s).map(|q| q.into_owned()).unwrap_or_else(|_| format!("'{}'", s.replace('\0', "")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_narrowed_replay_carries_every_option_and_quotes_names() {
        let mut r = Replay { root: None, seed: 7, options: Vec::new() };
        r.path("--kernels-dir", Path::new("/k")).value("--flush", "start").flag("--no-bundled");
        let line = r.narrowed("riscv64+zbb", BackendKind::Qemu, Kernel::Md5, Some("jtreg"), Some("1M 'a'"));
        assert_eq!(
            line,
            "lab run --seed 7 --kernels-dir /k --flush start --no-bundled --arch riscv64 --zbb --backend qemu \
             --kernel md5 --set '=jtreg' --case \"=1M 'a'\""
        );
        assert_eq!(
            r.fuzz_target("riscv64", BackendKind::Unicorn, Kernel::Md5),
            "lab fuzz --seed 7 --kernels-dir /k --flush start --no-bundled --arch riscv64 --no-zbb --backend unicorn \
             --kernel md5"
        );
        let vl = crate::variant::Variant::by_name("riscv64+v").and_then(|v| v.vector_length()).unwrap();
        let at = r.narrowed_at("riscv64+v", BackendKind::Qemu, Some(vl.at(128)), Kernel::Md5, Some("jtreg"), None);
        assert!(at.ends_with("--variant '=riscv64+v' --backend qemu --kernel md5 --set '=jtreg' --vlen 128"), "{at}");
        assert_eq!(
            r.variant("x86_64"),
            "lab run --seed 7 --kernels-dir /k --flush start --no-bundled --variant '=x86_64'",
            "x86_64+avx2 and the others share --arch x86_64"
        );
        r.root = Some("/my lab".into());
        assert!(r.narrowed("x86_64", BackendKind::Native, Kernel::Poly1305, None, None).starts_with(
            "KERNEL_LAB_ROOT='/my lab' lab run --seed 7 --kernels-dir /k --flush start --no-bundled --variant \
             '=x86_64' --backend native --kernel poly1305"
        ));
    }
}
