//! Linux's Poly1305 (the cryptogams perlasm as the kernel carries it): no capability word and
//! no function table. The kernel's C glue (arch/x86/crypto/poly1305_glue.c, since 6.16
//! lib/crypto/x86/poly1305.h) calls `poly1305_init_x86_64(ctx, key)` and then picks the
//! `blocks` and `emit` functions itself from the CPU's features (`poly1305_use_avx`,
//! `_avx2`, `_avx512` static keys): `poly1305_blocks_x86_64` / `_avx` / `_avx2` / `_avx512`
//! `(ctx, inp, len, padbit)` and `poly1305_emit_x86_64` / `poly1305_emit_avx(ctx, mac,
//! nonce)`. The lab runs such objects once per path the glue can choose, each its own variant
//! (`poly1305-x86_64@avx2`) whose `poly1305_init`, `poly1305_blocks` and `poly1305_emit`
//! entries are the path's functions (the OpenSSL family's call shapes; init's return value and
//! third argument are not used: Linux's init has two arguments). A path whose `blocks`
//! function the objects lack (a kernel built without `CONFIG_AS_AVX512`) is listed as not run.
//!
//! Every `blocks` call of a vector path goes to that path's function, whatever its length:
//! the assembly's own entry handles every length (below 128 bytes in base 2^64 it runs its
//! scalar loop). Linux's glue also calls `poly1305_blocks_x86_64` for calls under 288 bytes
//! while the state is in base 2^64, and cuts calls at 4 KiB; both only choose among the same
//! functions, so the lab covers the glue's choices and more.

use std::collections::BTreeSet;

use super::capability::isa_with;
use super::UserKernel;
use crate::contract::{POLY1305_BLOCKS, POLY1305_EMIT, POLY1305_INIT};
use crate::image::Image;
use crate::variant::Arch;

/// One code path Linux's glue can choose.
#[derive(Debug, Clone, Copy)]
pub struct GluePath {
    /// Report name (`avx2`), appended to the variant's name.
    pub name: &'static str,
    /// The `blocks` function the glue calls on this path.
    pub blocks: &'static str,
    /// The `emit` function the glue calls on this path.
    pub emit: &'static str,
    /// Extensions the path executes, by the arch row's names.
    pub extensions: &'static [&'static str],
    /// The glue's condition for the path.
    pub when: &'static str,
}

/// Linux's Poly1305 glue of one architecture.
#[derive(Debug, Clone, Copy)]
pub struct Glue {
    /// The architecture.
    pub arch: Arch,
    /// The init function: `(ctx, key)`, no function table.
    pub init: &'static str,
    /// The paths, scalar first.
    pub paths: &'static [GluePath],
    /// Where the glue is.
    pub source: &'static str,
}

/// Linux's glues, one per architecture the lab runs it on.
pub const LINUX_POLY1305: [Glue; 1] = [Glue {
    arch: Arch::X86_64,
    init: "poly1305_init_x86_64",
    paths: &[
        GluePath {
            name: "scalar",
            blocks: "poly1305_blocks_x86_64",
            emit: "poly1305_emit_x86_64",
            extensions: &[],
            when: "no AVX (or XSAVE without YMM state)",
        },
        GluePath {
            name: "avx",
            blocks: "poly1305_blocks_avx",
            emit: "poly1305_emit_avx",
            extensions: &["xsave", "avx"],
            when: "X86_FEATURE_AVX and YMM state",
        },
        GluePath {
            name: "avx2",
            blocks: "poly1305_blocks_avx2",
            emit: "poly1305_emit_avx",
            extensions: &["xsave", "avx", "avx2"],
            when: "+ X86_FEATURE_AVX2",
        },
        GluePath {
            name: "avx512",
            blocks: "poly1305_blocks_avx512",
            emit: "poly1305_emit_avx",
            extensions: &["xsave", "avx", "avx2", "avx512f"],
            when: "+ X86_FEATURE_AVX512F and AVX-512 state, not Skylake-X",
        },
    ],
    source: "Linux arch/x86/crypto/poly1305_glue.c (5.6-6.15), lib/crypto/x86/poly1305.h (6.16-)",
}];

/// The glue of `arch`, if Linux's Poly1305 has one the lab knows.
pub fn glue(arch: Arch) -> Option<&'static Glue> {
    LINUX_POLY1305.iter().find(|g| g.arch == arch)
}

/// Whether `init` (the address the lab calls as `poly1305_init`) is Linux's init of the
/// image's architecture, which takes no function table.
pub fn is_linux_init(image: &Image, init: u64) -> bool {
    glue(image.arch).and_then(|g| image.symbol(g.init)).is_some_and(|s| s.addr == init)
}

/// The kernel as one variant per path of Linux's glue when its objects define the glue's
/// init (`poly1305_init_x86_64`) and no `--symbol` maps a Poly1305 contract; itself otherwise.
///
/// # Errors
/// A path's ISA cannot be declared (an arch row without the extension).
pub fn expand(k: UserKernel) -> Result<Vec<UserKernel>, String> {
    let Some(g) = glue(k.arch()) else { return Ok(vec![k]) };
    let defined: BTreeSet<String> = match &k.defines {
        Some(d) if d.contains(g.init) => d.clone(),
        _ => return Ok(vec![k]),
    };
    let mapped = [POLY1305_INIT, POLY1305_BLOCKS, POLY1305_EMIT].iter().any(|c| k.symbols.contains_key(*c));
    if mapped {
        return Ok(vec![k]);
    }
    let present = |p: &GluePath| defined.contains(p.blocks) && defined.contains(p.emit);
    let union: Vec<&str> = g.paths.iter().filter(|p| present(p)).flat_map(|p| p.extensions.iter().copied()).collect();
    let scan_isa = isa_with(&k.isa, &union).ok();
    let mut out = Vec::new();
    for p in g.paths {
        let mut v = UserKernel { name: format!("{}@{}", k.name, p.name), ..k.clone() };
        for (c, s) in [(POLY1305_INIT, g.init), (POLY1305_BLOCKS, p.blocks), (POLY1305_EMIT, p.emit)] {
            v.symbols.insert(c.into(), s.into());
        }
        v.replay.push(("--variant".into(), format!("={}", v.name)));
        v.scan_isa = scan_isa.clone();
        v.dispatch_path = Some(p.name);
        match isa_with(&k.isa, p.extensions) {
            Ok(isa) => v.isa = isa,
            Err(e) => v.not_run = Some(format!("the {} path's ISA cannot be declared: {e}", p.name)),
        }
        if !present(p) {
            let missing = if defined.contains(p.blocks) { p.emit } else { p.blocks };
            v.not_run = Some(format!(
                "path {} not run: the objects do not define {missing} (Linux's glue calls it when {}; \
                 this build left it out)",
                p.name, p.when
            ));
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user_kernel::DeclaredIsa;

    fn kernel(defines: &[&str]) -> UserKernel {
        UserKernel {
            name: "poly".into(),
            origin: "test".into(),
            isa: DeclaredIsa::parse("x86-64", Arch::X86_64).expect("isa"),
            sources: Vec::new(),
            objects: Vec::new(),
            symbols: Default::default(),
            replay: Vec::new(),
            defines: Some(defines.iter().map(|s| (*s).to_string()).collect()),
            abi_upper_bits: None,
            dispatch_path: None,
            scan_isa: None,
            not_run: None,
            partial_loads: None,
            poly1305_acc: None,
        }
    }

    #[test]
    fn one_variant_per_glue_path_with_its_functions() {
        let all: Vec<&str> = ["poly1305_init_x86_64", "poly1305_emit_x86_64", "poly1305_emit_avx"]
            .into_iter()
            .chain(LINUX_POLY1305[0].paths.iter().map(|p| p.blocks))
            .collect();
        let v = expand(kernel(&all)).expect("expand");
        let names: Vec<&str> = v.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["poly@scalar", "poly@avx", "poly@avx2", "poly@avx512"]);
        let avx2 = &v[2];
        assert_eq!(avx2.symbols[POLY1305_BLOCKS], "poly1305_blocks_avx2");
        assert_eq!(avx2.symbols[POLY1305_EMIT], "poly1305_emit_avx");
        assert_eq!(avx2.symbols[POLY1305_INIT], "poly1305_init_x86_64");
        assert_eq!(avx2.isa.text, "x86-64+xsave+avx+avx2");
        assert_eq!(v[0].symbols[POLY1305_EMIT], "poly1305_emit_x86_64");
        assert!(v.iter().all(|k| k.not_run.is_none()));
        assert!(v[0].scan_isa.as_ref().is_some_and(|i| i.extensions.contains(&"avx512f")));
    }

    #[test]
    fn a_path_whose_blocks_function_is_absent_is_not_run() {
        let some = ["poly1305_init_x86_64", "poly1305_blocks_x86_64", "poly1305_emit_x86_64"];
        let v = expand(kernel(&some)).expect("expand");
        assert_eq!(v.len(), 4);
        assert!(v[0].not_run.is_none());
        let why = v[3].not_run.as_deref().expect("avx512 not run");
        assert!(why.contains("poly1305_blocks_avx512"), "{why}");
    }

    #[test]
    fn objects_without_linux_init_or_with_a_mapping_stay_one_kernel() {
        assert_eq!(expand(kernel(&["poly1305_blocks"])).expect("expand").len(), 1);
        let mut k = kernel(&["poly1305_init_x86_64", "poly1305_blocks_avx2"]);
        k.symbols.insert(POLY1305_BLOCKS.into(), "poly1305_blocks_avx2".into());
        assert_eq!(expand(k).expect("expand").len(), 1);
    }
}
