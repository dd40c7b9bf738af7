//! The code path an OpenSSL-family image's `poly1305_init` chooses.
//!
//! OpenSSL's C code (crypto/poly1305/poly1305.c, `Poly1305_Init`) calls `poly1305_init(ctx,
//! key, &func)`; when it returns non-zero, `func` holds the `blocks` and `emit` entry points of
//! the path the assembly chose (from `OPENSSL_ia32cap_P` / `OPENSSL_armcap_P`), and every later
//! call goes through them; when it returns zero, the C code calls the `poly1305_blocks` and
//! `poly1305_emit` symbols. The choice depends only on the image (its capability word is
//! linked in), so the lab asks once per image: one `poly1305_init` call on Unicorn (init is
//! scalar code on every path), whose `func` the planner then calls. Every case still calls
//! `poly1305_init` on its own backend, and a `func` that differs from this answer is a finding
//! ([`crate::cases::openssl`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use crate::abi::Abi;
use crate::backend::{run_batch, Limits, UnicornBackend};
use crate::batch::{Arg, BatchBuilder, Placement};
use crate::contract::{POLY1305_BLOCKS, POLY1305_EMIT, POLY1305_INIT, POLY1305_OPAQUE_BYTES};
use crate::image::Image;
use crate::reference::openssl::PolyCtx;
use crate::reference::poly1305::CLAMP;
use crate::user_kernel::glue_paths::{glue_at, is_glue_init, Glue};

/// The entry points a `poly1305_init` image is called through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolyPath {
    /// `poly1305_init`.
    pub init: u64,
    /// The `blocks` function: `func[0]` when init returned non-zero, else `poly1305_blocks`.
    pub blocks: u64,
    /// The `emit` function: `func[1]` when init returned non-zero, else `poly1305_emit`.
    pub emit: u64,
    /// Whether init returned non-zero (and so set `func`).
    pub via_func: bool,
    /// The name of `blocks` in the image (`poly1305_blocks_avx2`), for call labels.
    pub blocks_name: String,
    /// The name of `emit` in the image.
    pub emit_name: String,
    /// Why the lab's probe call failed, when it did: the cases then call the symbols, and
    /// every case's own `poly1305_init` call reports what it did.
    pub probe_error: Option<String>,
    /// Whether init leaves the architecture's scalar base 2^64 layout (h = 0, the clamped r
    /// where [`crate::reference::openssl::PolyCtx`] puts it). Not so on a path with a state of
    /// its own from the start (x86_64 AVX-512 IFMA: base 2^44): its h is judged by the tag only.
    pub scalar_form: bool,
    /// How the init call reads in labels: `poly1305_init(ctx, key, func)`, or Linux's
    /// `poly1305_init_x86_64(ctx, key)` (no function table).
    pub init_call: String,
    /// What init writes after the scalar layout's bytes, when that does not depend on the key
    /// (cryptogams' and Linux's armv8 init marks its power table as not computed with -1 at
    /// byte 48): a context the lab lays with a given h carries it, as a context from init
    /// does. `None`: init writes nothing there, or something that depends on the key (a
    /// chain then starts from init).
    pub init_tail: Option<Vec<u8>>,
    /// The caller's glue, when init is a glue's init ([`crate::user_kernel::glue_paths::glue_at`]):
    /// its `blocks` declare `len` as the glue does (`u32` on Linux's arm64).
    pub glue: Option<&'static Glue>,
}

impl PolyPath {
    /// The name of the function at `addr` in `image` (`poly1305_blocks_avx2`), or its address.
    pub fn name(image: &Image, addr: u64) -> String {
        image.symbol_containing(addr).map_or_else(
            || format!("{addr:#x}"),
            |(n, s)| {
                if s.addr == addr {
                    n.to_owned()
                } else {
                    format!("{n}+{:#x}", addr - s.addr)
                }
            },
        )
    }
}

/// The key the probe passes (any clamped key does: init's choice does not depend on it).
const PROBE_KEY: [u8; 32] = [0x55; 32];

type Probes = Mutex<HashMap<PathBuf, PolyPath>>;

/// The path of `image`, when it defines `poly1305_init`, `poly1305_blocks` and `poly1305_emit`
/// (`None` otherwise: the scalar-layout contract). When the probe call fails (a fault, a
/// `func` pointing outside the image's code) the path is the symbols', with
/// [`PolyPath::probe_error`] saying why. Computed once per image file.
pub fn poly1305_path(image: &Image) -> Option<PolyPath> {
    let addr = |s| image.entry(s).map(|s| s.addr);
    let (init, blocks, emit) = (addr(POLY1305_INIT)?, addr(POLY1305_BLOCKS)?, addr(POLY1305_EMIT)?);
    static PROBES: OnceLock<Probes> = OnceLock::new();
    let probes = PROBES.get_or_init(Probes::default);
    if let Some(known) = probes.lock().ok().and_then(|m| m.get(&image.path).cloned()) {
        return Some(known);
    }
    let found = probe(image, init).map_or_else(
        |e| path(image, init, (blocks, emit), false, Some(e), (true, None)),
        |(f, form)| path(image, init, f.unwrap_or((blocks, emit)), f.is_some(), None, form),
    );
    if let Ok(mut m) = probes.lock() {
        m.insert(image.path.clone(), found.clone());
    }
    Some(found)
}

fn path(
    image: &Image,
    init: u64,
    (blocks, emit): (u64, u64),
    via_func: bool,
    err: Option<String>,
    (scalar_form, init_tail): (bool, Option<Vec<u8>>),
) -> PolyPath {
    let (blocks_name, emit_name) = (PolyPath::name(image, blocks), PolyPath::name(image, emit));
    let glue = glue_at(image, init);
    let init_call =
        glue.map_or_else(|| format!("{POLY1305_INIT}(ctx, key, func)"), |g| format!("{}(ctx, key)", g.init));
    PolyPath {
        init,
        blocks,
        emit,
        via_func,
        blocks_name,
        emit_name,
        probe_error: err,
        scalar_form,
        init_call,
        init_tail,
        glue,
    }
}

/// The key of the probe's second init call: init's tail ([`PolyPath::init_tail`]) is taken
/// only when both calls leave the same.
const PROBE_KEY_2: [u8; 32] = [0xa3; 32];

/// How init leaves the context: whether in the scalar layout, and its key-independent tail.
type Form = (bool, Option<Vec<u8>>);

/// Two `poly1305_init` calls on Unicorn: `Some((blocks, emit))` from the first's `func` when
/// it returned non-zero, `None` when it returned zero; and how the context is then ([`Form`]).
fn probe(image: &Image, init: u64) -> Result<(Option<(u64, u64)>, Form), String> {
    let mut b = BatchBuilder::new(Abi::of(image.arch));
    let ctx = b.buffer("ctx", &[0u8; POLY1305_OPAQUE_BYTES], true, Placement::End);
    let key = b.buffer("key", &PROBE_KEY, false, Placement::End);
    let func = b.buffer("func", &[0u8; 16], true, Placement::End);
    let call = b.call(init, [Arg::Ptr(ctx, 0), Arg::Ptr(key, 0), Arg::Ptr(func, 0), Arg::Imm(0)], 1);
    let ctx2 = b.buffer("ctx", &[0u8; POLY1305_OPAQUE_BYTES], true, Placement::End);
    let key2 = b.buffer("key", &PROBE_KEY_2, false, Placement::End);
    let func2 = b.buffer("func", &[0u8; 16], true, Placement::End);
    let call2 = b.call(init, [Arg::Ptr(ctx2, 0), Arg::Ptr(key2, 0), Arg::Ptr(func2, 0), Arg::Imm(0)], 2);
    let arena = image.arena().map_err(|e| e.to_string())?;
    let batch = b.layout(arena).map_err(|e| e.to_string())?;
    let mut uc = UnicornBackend::new(image, Limits::default()).map_err(|e| e.to_string())?;
    // init is scalar code; Zbb is emulated in case a riscv64 build uses it.
    uc.emulate_zbb(true).map_err(|e| e.to_string())?;
    // An image linked for RVV: its driver's vector entry state is skipped, as in the runs.
    uc.skip_vector_entry(image).map_err(|e| e.to_string())?;
    let run = run_batch(&mut uc, &batch).map_err(|e| e.to_string())?;
    if let Some(f) = run.fault_of(call).or_else(|| run.fault_of(call2)) {
        let pc = f.pc.map_or_else(String::new, |pc| format!(" at {}", image.symbolize(pc)));
        return Err(format!("{POLY1305_INIT} faulted on Unicorn: {}{pc}", f.kind));
    }
    let (completed, ret) = batch.outcome(&run.resp, call);
    if !completed || !batch.outcome(&run.resp, call2).0 {
        return Err(format!("{POLY1305_INIT} did not return on Unicorn"));
    }
    // A glue's init takes no function table: the glue picks blocks and emit (the variant's
    // own entries, [`crate::user_kernel::glue_paths`]), whatever init returns.
    let no_func = is_glue_init(image, init);
    let layout = PolyCtx::of(image.arch);
    let r = u128::from_le_bytes(PROBE_KEY[..16].try_into().unwrap_or_default()) & CLAMP;
    let want = layout.with([0; 3], r);
    let got = batch.buffer(&run.resp, ctx);
    let scalar = layout.is_scalar(got)
        && got.get(..24) == want.get(..24)
        && got.get(layout.r_at..layout.r_at + 16) == want.get(layout.r_at..layout.r_at + 16);
    let tail = got.get(layout.bytes..).unwrap_or_default();
    let same = batch.buffer(&run.resp, ctx2).get(layout.bytes..) == Some(tail);
    let init_tail = (same && tail.iter().any(|&b| b != 0)).then(|| tail.to_vec());
    let form = (scalar && (same || tail.iter().all(|&b| b == 0)), init_tail);
    let words = batch.buffer(&run.resp, func);
    let word = |i: usize| u64::from_le_bytes(words[8 * i..8 * i + 8].try_into().unwrap_or_default());
    // `int` return: only the low 32 bits are specified.
    if ret as u32 == 0 || no_func {
        return Ok((None, form));
    }
    let (fb, fe) = (word(0), word(1));
    for (what, a) in [("blocks", fb), ("emit", fe)] {
        if !image.is_code(a) {
            return Err(format!("{POLY1305_INIT} returned non-zero with func.{what} = {a:#x}, not code of the image"));
        }
    }
    Ok((Some((fb, fe)), form))
}
