//! Objects that reference OpenSSL's capability word (`OPENSSL_ia32cap_P`, `OPENSSL_armcap_P`,
//! `OPENSSL_riscvcap_P`) choose their code path at run time: the lab defines the word and
//! runs the kernel once per path ([`crate::arch::capability`]), each path its own variant
//! (`my-poly@avx2`) whose declared ISA adds the path's extensions, so a backend that cannot run
//! them skips the path saying why. A path whose code the objects do not hold (no
//! `poly1305_blocks_avx512` in a clang-built perlasm) is listed as not run with the reason; a
//! symbol only such a path needs (armv8's `poly1305_blocks_sve2`, defined in another file) is
//! defined by the lab as a trapping stub, never reached while the path is not chosen.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::isa_decl::DeclaredIsa;
use super::{objects, UserKernel};
use crate::arch::capability::{CapabilitySpec, DispatchPath};

/// The kernel as one variant per dispatch path when its objects reference the architecture's
/// capability word; itself otherwise.
///
/// # Errors
/// The generated capability source cannot be written (naming the file).
pub fn expand(k: UserKernel) -> Result<Vec<UserKernel>, String> {
    let cap = &k.arch().spec().capability;
    let (defined, undefined) = symbols(&k);
    if !undefined.contains(cap.symbol) {
        return Ok(vec![k]);
    }
    let present = |p: &DispatchPath| p.marker.is_none_or(|m| defined.contains(m));
    // Symbols of paths the objects do not hold, which their code references: trapping stubs.
    let stubs: Vec<&str> = cap.paths.iter().filter_map(|p| p.marker).filter(|m| undefined.contains(*m)).collect();
    let union: Vec<&str> = cap.paths.iter().filter(|p| present(p)).flat_map(|p| p.extensions.iter().copied()).collect();
    let scan_isa = isa_with(&k.isa, &union).ok();
    let mut out = Vec::new();
    for path in cap.paths {
        let source = write_source(cap, path, &stubs, k.arch().spec().capability_trap)?;
        let mut v = UserKernel { name: format!("{}@{}", k.name, path.name), ..k.clone() };
        v.sources.push(source);
        v.replay.push(("--variant".into(), format!("={}", v.name)));
        v.scan_isa = scan_isa.clone();
        v.dispatch_path = Some(path.name);
        match isa_with(&k.isa, path.extensions) {
            Ok(isa) => v.isa = isa,
            Err(e) => v.not_run = Some(format!("the {} path's ISA cannot be declared: {e}", path.name)),
        }
        if !present(path) {
            let marker = path.marker.unwrap_or_default();
            v.not_run = Some(format!(
                "path {} not run: the objects do not define {marker} (its code is not in this build)",
                path.name
            ));
        }
        out.push(v);
    }
    Ok(out)
}

/// The symbols the kernel's objects define (global or local: perlasm keeps most path
/// functions local), and those they reference without defining (common symbols included).
fn symbols(k: &UserKernel) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut defined, mut undefined) = (BTreeSet::new(), BTreeSet::new());
    for o in &k.objects {
        let Ok((units, _)) = objects::read(o, k.arch()) else { continue };
        for u in units {
            defined.extend(u.defined.into_iter().map(|(s, _)| s));
            defined.extend(u.local);
            undefined.extend(u.undefined);
            // A common capability word is the objects' tentative zero: the lab's definition
            // overrides it, as OpenSSL's own one does.
            undefined.extend(u.common);
        }
    }
    let undefined = undefined.into_iter().filter(|s| !defined.contains(s)).collect();
    (defined, undefined)
}

/// `isa` with `extensions` added (`x86-64+xsave+avx+avx2`).
pub(super) fn isa_with(isa: &DeclaredIsa, extensions: &[&str]) -> Result<DeclaredIsa, String> {
    let mut names: Vec<&str> = Vec::new();
    for e in extensions.iter().filter(|e| !isa.extensions.contains(e)) {
        if !names.contains(e) {
            names.push(e);
        }
    }
    if names.is_empty() {
        return Ok(isa.clone());
    }
    DeclaredIsa::parse(&format!("{}+{}", isa.text, names.join("+")), isa.arch).map_err(|e| e.to_string())
}

/// `isa` without `extensions` (a scalar path's ISA when the object's own attributes declare
/// the vector extension its other path needs): the base or level and the remaining
/// extensions, spelled out. An extension a named level implies (`x86-64-v3`: AVX2) stays.
///
/// # Errors
/// The rebuilt string does not parse (cannot happen for a parsed `isa`; said, not panicked).
pub(super) fn isa_without(isa: &DeclaredIsa, extensions: &[&str]) -> Result<DeclaredIsa, String> {
    if !extensions.iter().any(|e| isa.extensions.contains(e)) {
        return Ok(isa.clone());
    }
    let spec = &isa.arch.spec().isa;
    let first = isa.text.split(['_', '+']).next().unwrap_or(spec.base).to_ascii_lowercase();
    // `rv64gcv`: single letters glued to the base are extensions, listed below.
    let head = if first.starts_with(spec.base) { spec.base.to_string() } else { first };
    let keep = isa.extensions.iter().filter(|e| !extensions.contains(e)).copied();
    let text: Vec<&str> = std::iter::once(head.as_str()).chain(keep).collect();
    DeclaredIsa::parse(&text.join("+"), isa.arch).map_err(|e| e.to_string())
}

/// The assembly source defining the capability word for `path` (read-only data) and the
/// trapping `stubs`, written under the cache (content-named, so images stay content-keyed).
fn write_source(cap: &CapabilitySpec, path: &DispatchPath, stubs: &[&str], trap: &str) -> Result<PathBuf, String> {
    let words: Vec<String> =
        cap.bytes(path).chunks(4).map(|w| format!("{:#010x}", u32::from_le_bytes([w[0], w[1], w[2], w[3]]))).collect();
    let mut s = format!(
        "/* Generated by kernel-lab: {sym} for the {name} path ({src}). */\n\
         \t.section .rodata\n\t.balign 8\n\t.globl {sym}\n\t.type {sym}, %object\n{sym}:\n\t.long {w}\n\
         \t.size {sym}, {n}\n",
        sym = cap.symbol,
        name = path.name,
        src = path.source,
        w = words.join(", "),
        n = cap.words * 4
    );
    if !stubs.is_empty() {
        s.push_str("\t.text\n");
    }
    for stub in stubs {
        s.push_str(&format!(
            "/* {stub}: referenced, not in the objects; a path not run needs it. */\n\
             \t.globl {stub}\n\t.type {stub}, %function\n{stub}:\n\t{trap}\n\t.size {stub}, . - {stub}\n"
        ));
    }
    let dir = crate::paths::cache_dir().join("capability");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join(format!("{}-{:016x}.S", cap.symbol, crate::fnv::fnv1a(s.as_bytes())));
    if std::fs::read_to_string(&file).ok().as_deref() != Some(s.as_str()) {
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, &s)
            .and_then(|()| std::fs::rename(&tmp, &file))
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(file)
}
