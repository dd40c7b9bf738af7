//! Poly1305 objects whose callers choose the code path (Linux's glue, cryptogams' riscv64):
//! no capability word and no function table. The caller's C glue calls an init function
//! `(ctx, key)` and then picks the `blocks` and `emit` functions itself from the CPU's
//! features. The lab runs such objects once per path the glue can choose, each its own variant
//! (`poly1305-x86_64@avx2`) whose `poly1305_init`, `poly1305_blocks` and `poly1305_emit`
//! entries are the path's functions (the OpenSSL family's call shapes; init's return value and
//! third argument are not used: these inits have two arguments). A path whose `blocks`
//! function the objects lack (a kernel built without `CONFIG_AS_AVX512`) is listed as not run,
//! naming the symbol. A glue is recognised by its marker symbol ([`Glue::marker`]): Linux's
//! init names, or cryptogams' `poly1305_blocks_vx`.
//!
//! x86_64 (arch/x86/crypto/poly1305_glue.c, since 6.16 lib/crypto/x86/poly1305.h):
//! `poly1305_init_x86_64(ctx, key)`, `poly1305_blocks_x86_64` / `_avx` / `_avx2` / `_avx512`
//! `(ctx, inp, size_t len, u32 padbit)` chosen by the `poly1305_use_avx`, `_avx2`, `_avx512`
//! static keys, `poly1305_emit_x86_64` / `poly1305_emit_avx(ctx, mac, nonce)`. The glue sends
//! calls under 288 bytes to `poly1305_blocks_x86_64` while the state is in base 2^64 and cuts
//! calls at 4 KiB.
//!
//! arm64: the same perlasm (poly1305-armv8.pl) under three sets of names, one per glue
//! generation (the assembler's `-Dpoly1305_init=...` flags of the kernel's Makefile, later
//! `#define`s in the .pl itself): `poly1305_init_arm64` / `poly1305_blocks` /
//! `poly1305_blocks_neon` / `poly1305_emit` (arch/arm64/crypto/poly1305-glue.c),
//! `poly1305_block_init_arch` / `poly1305_blocks` / `poly1305_blocks_neon` /
//! `poly1305_emit_arch` (lib/crypto/arm64/poly1305-glue.c), `poly1305_block_init` /
//! `poly1305_blocks_arm64` / `poly1305_blocks_neon` / `poly1305_emit`
//! (lib/crypto/arm64/poly1305.h). Every generation declares `blocks(ctx, src, u32 len, u32
//! hibit)`: `len` is a 32-bit argument whose upper half AAPCS64 leaves unspecified, and the
//! lab passes it as one ([`Glue::len_c_type`]). The glue calls NEON when the CPU has ASIMD and
//! SIMD is usable in the calling context, in chunks of at most 4 KiB (the older shash glue
//! only for updates over 128 bytes), scalar otherwise; the assembly's NEON entry itself hands
//! calls under 128 bytes to the scalar loop.
//!
//! riscv64 (cryptogams riscv/poly1305-riscv.pl, July 2025): `poly1305_init(ctx, key)` (returns
//! 0), `poly1305_blocks` and, when assembled with `__riscv_v >= 1000000`, the RVV entry
//! `poly1305_blocks_vx(ctx, inp, size_t len, u32 padbit)` that a caller with V calls instead
//! (it hands inputs under 192 bytes to `poly1305_blocks` itself), one `poly1305_emit`. The
//! marker is `poly1305_blocks_vx`, so objects that define only the OpenSSL-family names (the
//! lab's own examples, a build without V) stay one kernel.
//!
//! Every `blocks` call of a path goes to that path's function, whatever its length: the
//! assembly's own entry handles every length; the glues' length rules only choose among the
//! same functions, so the lab covers the glues' choices and more.

use super::capability::{isa_with, isa_without};
use super::UserKernel;
use crate::contract::{POLY1305_BLOCKS, POLY1305_EMIT, POLY1305_INIT};
use crate::image::Image;
use crate::variant::Arch;

/// One code path Linux's glue can choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// A caller's Poly1305 glue of one architecture (and generation of names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Glue {
    /// The architecture.
    pub arch: Arch,
    /// The symbol whose definition says the objects are this glue's: its init for Linux's
    /// glues (their names are their own), the RVV entry for cryptogams' riscv64 (its init is
    /// the OpenSSL family's `poly1305_init`, which other objects define too).
    pub marker: &'static str,
    /// The init function: `(ctx, key)`, no function table.
    pub init: &'static str,
    /// The paths, scalar first.
    pub paths: &'static [GluePath],
    /// The C type the glue declares `blocks`' `len` with: `size_t` (x86_64, riscv64), or `u32` (arm64),
    /// which the lab passes as a 32-bit argument (upper half garbage under the `fail`
    /// upper-bits policy, clean under `warn` with the reliance probed).
    pub len_c_type: &'static str,
    /// Where the glue is.
    pub source: &'static str,
}

impl Glue {
    /// Whether `len` is a 32-bit argument ([`Glue::len_c_type`] `u32`).
    pub fn len_is_32_bit(&self) -> bool {
        self.len_c_type == "u32"
    }
}

/// The arm64 glues' paths with their `blocks` and `emit` names: scalar, then NEON.
const fn arm64_paths(blocks: &'static str, emit: &'static str) -> [GluePath; 2] {
    [
        GluePath { name: "scalar", blocks, emit, extensions: &[], when: "no ASIMD, or SIMD not usable in the context" },
        GluePath {
            name: "neon",
            blocks: "poly1305_blocks_neon",
            emit,
            extensions: &[],
            when: "ASIMD (cpu_have_named_feature) and SIMD usable in the context",
        },
    ]
}

const ARM64_V1: [GluePath; 2] = arm64_paths("poly1305_blocks", "poly1305_emit");
const ARM64_V2: [GluePath; 2] = arm64_paths("poly1305_blocks", "poly1305_emit_arch");
const ARM64_V3: [GluePath; 2] = arm64_paths("poly1305_blocks_arm64", "poly1305_emit");

/// The glues: Linux's x86_64 and arm64's three generations of names, cryptogams' riscv64
/// (the first whose marker the objects define is theirs).
pub const GLUES: [Glue; 5] = [
    Glue {
        arch: Arch::X86_64,
        marker: "poly1305_init_x86_64",
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
        len_c_type: "size_t",
        source: "Linux arch/x86/crypto/poly1305_glue.c (5.6-6.15), lib/crypto/x86/poly1305.h (6.16-)",
    },
    Glue {
        arch: Arch::Aarch64,
        marker: "poly1305_init_arm64",
        init: "poly1305_init_arm64",
        paths: &ARM64_V1,
        len_c_type: "u32",
        source: "Linux arch/arm64/crypto/poly1305-glue.c (from 5.6; Makefile: -Dpoly1305_init=poly1305_init_arm64)",
    },
    Glue {
        arch: Arch::Aarch64,
        marker: "poly1305_block_init_arch",
        init: "poly1305_block_init_arch",
        paths: &ARM64_V2,
        len_c_type: "u32",
        source: "Linux lib/crypto/arm64/poly1305-glue.c (Makefile: -Dpoly1305_init=poly1305_block_init_arch \
                 -Dpoly1305_emit=poly1305_emit_arch)",
    },
    Glue {
        arch: Arch::Aarch64,
        marker: "poly1305_block_init",
        init: "poly1305_block_init",
        paths: &ARM64_V3,
        len_c_type: "u32",
        source: "Linux lib/crypto/arm64/poly1305.h (poly1305-armv8.pl under __KERNEL__: poly1305_init is \
                 poly1305_block_init, poly1305_blocks is poly1305_blocks_arm64)",
    },
    Glue {
        arch: Arch::Riscv64,
        marker: "poly1305_blocks_vx",
        init: "poly1305_init",
        paths: &[
            GluePath {
                name: "scalar",
                blocks: "poly1305_blocks",
                emit: "poly1305_emit",
                extensions: &[],
                when: "no V extension",
            },
            GluePath {
                name: "vx",
                blocks: "poly1305_blocks_vx",
                emit: "poly1305_emit",
                extensions: &["v"],
                when: "the V extension (RVV 1.0)",
            },
        ],
        len_c_type: "size_t",
        source: "cryptogams riscv/poly1305-riscv.pl (poly1305_blocks_vx since July 2025; no capability word: \
                 the caller picks the entry)",
    },
];

/// The glues of `arch`.
pub fn glues(arch: Arch) -> impl Iterator<Item = &'static Glue> {
    GLUES.iter().filter(move |g| g.arch == arch)
}

/// The glue whose init is at `init` (the address the lab calls as `poly1305_init`) in
/// `image` and whose marker the image defines: a glue's init takes no function table.
pub fn glue_at(image: &Image, init: u64) -> Option<&'static Glue> {
    glues(image.arch).find(|g| image.symbol(g.marker).is_some() && image.symbol(g.init).is_some_and(|s| s.addr == init))
}

/// Whether `init` is a glue's init of the image's architecture ([`glue_at`]).
pub fn is_glue_init(image: &Image, init: u64) -> bool {
    glue_at(image, init).is_some()
}

/// The kernel as one variant per path of a glue when its objects define the glue's marker
/// (`poly1305_init_x86_64`, `poly1305_init_arm64`, ..., `poly1305_blocks_vx`) and no
/// `--symbol` maps a Poly1305 contract; itself otherwise.
///
/// # Errors
/// A path's ISA cannot be declared (an arch row without the extension).
pub fn expand(k: UserKernel) -> Result<Vec<UserKernel>, String> {
    let Some(defined) = k.defines.clone() else { return Ok(vec![k]) };
    let Some(g) = glues(k.arch()).find(|g| defined.contains(g.marker)) else { return Ok(vec![k]) };
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
        // A path declares only its own extensions: the scalar path of an object whose
        // attributes name V runs as a CPU without V would run it.
        let others: Vec<&str> =
            g.paths.iter().flat_map(|q| q.extensions.iter().copied()).filter(|e| !p.extensions.contains(e)).collect();
        match isa_without(&k.isa, &others).and_then(|base| isa_with(&base, p.extensions)) {
            Ok(isa) => v.isa = isa,
            Err(e) => v.not_run = Some(format!("the {} path's ISA cannot be declared: {e}", p.name)),
        }
        if !present(p) {
            let missing = if defined.contains(p.blocks) { p.emit } else { p.blocks };
            v.not_run = Some(format!(
                "path {} not run: the objects do not define {missing} (the glue calls it when {}; \
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
            .chain(GLUES[0].paths.iter().map(|p| p.blocks))
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

    fn arm64_kernel(defines: &[&str]) -> UserKernel {
        UserKernel { isa: DeclaredIsa::parse("armv8-a", Arch::Aarch64).expect("isa"), ..kernel(defines) }
    }

    #[test]
    fn every_arm64_generation_of_names_is_two_paths_with_its_own_functions() {
        let generations = [
            ("poly1305_init_arm64", "poly1305_blocks", "poly1305_emit"),
            ("poly1305_block_init_arch", "poly1305_blocks", "poly1305_emit_arch"),
            ("poly1305_block_init", "poly1305_blocks_arm64", "poly1305_emit"),
        ];
        for (init, blocks, emit) in generations {
            let v = expand(arm64_kernel(&[init, blocks, "poly1305_blocks_neon", emit])).expect("expand");
            let names: Vec<&str> = v.iter().map(|k| k.name.as_str()).collect();
            assert_eq!(names, ["poly@scalar", "poly@neon"], "{init}");
            assert_eq!(v[0].symbols[POLY1305_INIT], init);
            assert_eq!(v[0].symbols[POLY1305_BLOCKS], blocks);
            assert_eq!(v[1].symbols[POLY1305_BLOCKS], "poly1305_blocks_neon");
            assert!(v.iter().all(|k| k.symbols[POLY1305_EMIT] == emit && k.not_run.is_none()), "{init}");
        }
        let g = glues(Arch::Aarch64).find(|g| g.init == "poly1305_block_init").expect("glue");
        assert!(g.len_is_32_bit() && !GLUES[0].len_is_32_bit());
    }

    #[test]
    fn an_arm64_object_without_the_neon_function_lists_that_path_as_not_run() {
        let v = expand(arm64_kernel(&["poly1305_init_arm64", "poly1305_blocks", "poly1305_emit"])).expect("expand");
        assert!(v[0].not_run.is_none());
        let why = v[1].not_run.as_deref().expect("neon not run");
        assert!(why.contains("poly1305_blocks_neon") && why.contains("path neon"), "{why}");
    }

    fn riscv_kernel(defines: &[&str]) -> UserKernel {
        UserKernel { isa: DeclaredIsa::parse("rv64gc", Arch::Riscv64).expect("isa"), ..kernel(defines) }
    }

    #[test]
    fn cryptogams_riscv64_with_its_rvv_entry_is_a_scalar_and_a_vx_path() {
        let names = ["poly1305_init", "poly1305_blocks", "poly1305_blocks_vx", "poly1305_emit"];
        let v = expand(riscv_kernel(&names)).expect("expand");
        let got: Vec<&str> = v.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(got, ["poly@scalar", "poly@vx"]);
        assert_eq!(v[0].symbols[POLY1305_BLOCKS], "poly1305_blocks");
        assert_eq!(v[1].symbols[POLY1305_BLOCKS], "poly1305_blocks_vx");
        assert!(v.iter().all(|k| k.symbols[POLY1305_INIT] == "poly1305_init" && k.not_run.is_none()));
        assert_eq!(v[0].isa.text, "rv64gc");
        assert_eq!(v[1].isa.text, "rv64gc+v");
        // The object's own attributes declaring V: the scalar path still declares none.
        let attributed =
            UserKernel { isa: DeclaredIsa::parse("rv64gcv_zbb", Arch::Riscv64).expect("isa"), ..riscv_kernel(&names) };
        let v = expand(attributed).expect("expand");
        assert_eq!(v[0].isa.extensions, ["zbb"]);
        assert!(v[1].isa.extensions.contains(&"v") && v[1].isa.extensions.contains(&"zbb"));
        assert!(v[0].scan_isa.as_ref().is_some_and(|i| i.extensions.contains(&"v")));
    }

    #[test]
    fn riscv64_objects_without_the_rvv_entry_stay_one_kernel() {
        let v = expand(riscv_kernel(&["poly1305_init", "poly1305_blocks", "poly1305_emit"])).expect("expand");
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].name, "poly");
    }

    #[test]
    fn objects_without_linux_init_or_with_a_mapping_stay_one_kernel() {
        assert_eq!(expand(kernel(&["poly1305_blocks"])).expect("expand").len(), 1);
        let mut k = kernel(&["poly1305_init_x86_64", "poly1305_blocks_avx2"]);
        k.symbols.insert(POLY1305_BLOCKS.into(), "poly1305_blocks_avx2".into());
        assert_eq!(expand(k).expect("expand").len(), 1);
    }
}
