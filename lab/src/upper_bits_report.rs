//! The `abi-upper-bits` warnings of a report once per image and argument: the dispatch-path
//! variants of one user's object (`poly1305-x86_64@avx2`, [`crate::user_kernel::capability`],
//! [`crate::user_kernel::glue_paths`]) are linked and probed one by one
//! ([`crate::int_args::reliance`]), so the same reliance shows once per path; `lab run`,
//! `lab fuzz` and `lab bench` merge those into one warning that names the paths it was seen on.

use crate::finding::{Class, Finding};

/// Words between a probe warning's function and its register ([`crate::int_args`]).
const DEPENDS: &str = " depends on the upper 32 bits of ";

/// The warning of one upper-bits finding `f` of `kernel` on `variant`, probed on `backend`:
/// "poly@avx2 (poly1305, probed on qemu): abi-upper-bits: poly1305_blocks_avx2 depends on ...".
pub fn warning(variant: &str, kernel: impl std::fmt::Display, backend: impl std::fmt::Display, f: &Finding) -> String {
    format!("{variant} ({kernel}, probed on {backend}): {}: {}", f.class.name(), f.text)
}

/// A [`warning`] read back: the object's name and path, kernel, backend, function, and the
/// argument with what follows it (`rcx (unsigned int padbit): a probe case ...`).
struct Parsed<'a> {
    base: &'a str,
    path: &'a str,
    kernel: &'a str,
    backend: &'a str,
    function: &'a str,
    argument: &'a str,
}

fn parse(w: &str) -> Option<Parsed<'_>> {
    let (variant, rest) = w.split_once(" (")?;
    let (base, path) = variant.split_once('@')?;
    let (kernel, rest) = rest.split_once(", probed on ")?;
    let head = format!("): {}: ", Class::UpperBits.name());
    let (backend, text) = rest.split_once(head.as_str())?;
    let (function, argument) = text.split_once(DEPENDS)?;
    Some(Parsed { base, path, kernel, backend, function, argument })
}

/// `warnings` with the upper-bits warnings of one object's path variants about one argument
/// merged into one, in the place of the first: "poly (poly1305; paths scalar, avx):
/// abi-upper-bits: poly1305_blocks_x86_64 (scalar, probed on unicorn), poly1305_blocks_avx
/// (avx, probed on qemu) depend on the upper 32 bits of rcx (unsigned int padbit): ...".
/// Other warnings, and an argument seen on one path only, are kept as they are.
pub fn merge_paths(warnings: Vec<String>) -> Vec<String> {
    let parsed: Vec<Option<Parsed<'_>>> = warnings.iter().map(|w| parse(w)).collect();
    fn key<'a>(p: &Parsed<'a>) -> (&'a str, &'a str, &'a str) {
        (p.base, p.kernel, p.argument)
    }
    let mut out = Vec::new();
    let mut done = vec![false; warnings.len()];
    for (i, w) in warnings.iter().enumerate() {
        if done[i] {
            continue;
        }
        let Some(p) = &parsed[i] else {
            out.push(w.clone());
            continue;
        };
        let group: Vec<usize> =
            (i..warnings.len()).filter(|&j| !done[j] && parsed[j].as_ref().is_some_and(|q| key(q) == key(p))).collect();
        group.iter().for_each(|&j| done[j] = true);
        if group.len() == 1 {
            out.push(w.clone());
            continue;
        }
        let members: Vec<&Parsed<'_>> = group.iter().filter_map(|&j| parsed[j].as_ref()).collect();
        let paths: Vec<&str> = members.iter().map(|m| m.path).collect();
        let seen: Vec<String> =
            members.iter().map(|m| format!("{} ({}, probed on {})", m.function, m.path, m.backend)).collect();
        out.push(format!(
            "{} ({}; paths {}): {}: {} depend on the upper 32 bits of {}",
            p.base,
            p.kernel,
            paths.join(", "),
            Class::UpperBits.name(),
            seen.join(", "),
            p.argument
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(variant: &str, backend: &str, function: &str, argument: &str) -> String {
        let text = format!("{function}{DEPENDS}{argument}: a probe case with garbage there fails");
        warning(variant, "poly1305", backend, &Finding::new(Class::UpperBits, text))
    }

    #[test]
    fn one_objects_paths_merge_into_one_warning_per_argument_naming_the_paths() {
        let ws = vec![
            "builds: something else".to_owned(),
            w("poly@scalar", "unicorn", "poly1305_blocks", "x2 (u32 len)"),
            w("poly@scalar", "unicorn", "poly1305_blocks", "x3 (unsigned int padbit)"),
            w("poly@neon", "qemu", "poly1305_blocks_neon", "x2 (u32 len)"),
            w("poly@neon", "qemu", "poly1305_blocks_neon", "x3 (unsigned int padbit)"),
            w("other@neon", "qemu", "poly1305_blocks_neon", "x3 (unsigned int padbit)"),
        ];
        let m = merge_paths(ws.clone());
        assert_eq!(m.len(), 4, "{m:#?}");
        assert_eq!(m[0], ws[0]);
        assert_eq!(
            m[1],
            "poly (poly1305; paths scalar, neon): abi-upper-bits: poly1305_blocks (scalar, probed on unicorn), \
             poly1305_blocks_neon (neon, probed on qemu) depend on the upper 32 bits of x2 (u32 len): a probe case \
             with garbage there fails"
        );
        assert!(m[2].contains("paths scalar, neon") && m[2].contains("x3 (unsigned int padbit)"), "{}", m[2]);
        assert_eq!(m[3], ws[5], "another object's warning stays as it is");
    }

    #[test]
    fn warnings_of_variants_without_a_path_are_kept() {
        let ws = vec![w("mine", "qemu", "f", "x3 (int n)"), w("mine", "unicorn", "f", "x3 (int n)")];
        assert_eq!(merge_paths(ws.clone()), ws);
    }
}
