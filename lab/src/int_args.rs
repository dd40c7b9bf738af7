//! The upper 32 bits of C `int` arguments, which SysV x86-64 and AAPCS64 leave unspecified:
//! [`diagnose`] re-runs failing cases with them clean and names the argument a kernel reads
//! whole (`lab run` calls it on every batch with failures, under any policy); [`reliance`] is
//! the probe of [`UpperBits::Warn`]: under that policy every case passes its `int`
//! arguments clean, so the value checks mean what they say; this one probe case per image
//! passes garbage in their upper 32 bits (as the psABI allows: SysV x86-64 §3.2.3, AAPCS64
//! §6.8.2) and, when it fails and passes again with them clean ([`diagnose`]),
//! names each argument the kernel reads whole: one [`Class::UpperBits`] finding per image and
//! argument.

use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;

use crate::abi::{Abi, Int32Args, UpperBits};
use crate::backend::{run_batch, Backend};
use crate::batch::{Batch, BatchBuilder, Placement};
use crate::cases::plan::{CasePlan, IntArg, Stubs};
use crate::cases::procedure::plan_vector;
use crate::contract::{self, Family};
use crate::finding::{Class, Finding};
use crate::image::Image;
use crate::reference::{md5, poly1305};
use crate::variant::Kernel;
use crate::vectors::{Body, Vector};

/// Words in a finding of the diagnosis this probe reads.
const DEPENDS: &str = "depends on the upper 32 bits of ";

/// The probe case of `kernel`: a message long enough for multi-block calls and a tail (MD5:
/// `implCompressMB` with `ofs`/`limit`; Poly1305: `padbit` 1, then 0 for the padded tail).
fn probe_vector(kernel: Kernel) -> Vector {
    let msg: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
    let body = match kernel {
        Kernel::Md5 => Body::Md5Digest { msg: msg.clone().into(), digest: md5::digest(&msg), updates: Vec::new() },
        Kernel::Poly1305 => {
            let key: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(29).wrapping_add(11));
            let msg = &msg[..100];
            Body::Poly1305Tag { key, msg: msg.to_vec().into(), tag: poly1305::tag(&key, msg) }
        }
    };
    let name = "upper-bits probe (garbage in the upper 32 bits of every int argument)".to_owned();
    Vector { index: 0, name, source: "kernel-lab".into(), offsets: Vec::new(), body }
}

/// One finding per `int` argument of `kernel`'s contract that the image's code reads whole,
/// when `kernel` runs under [`UpperBits::Warn`] on an ABI that leaves those bits unspecified;
/// empty otherwise. `Err`: the probe could not run (laid out or executed).
pub fn reliance(backend: &mut dyn Backend, image: &Image, kernel: Kernel) -> Result<Vec<Finding>, String> {
    let abi = Abi::of(image.arch);
    let stubs = Stubs { upper_bits: Some(UpperBits::Fail), ..Stubs::of(image) };
    let Some(family) = stubs.family(kernel) else { return Ok(Vec::new()) };
    if abi.int32_args != Int32Args::UpperGarbage || UpperBits::for_family(family) != UpperBits::Warn {
        return Ok(Vec::new());
    }
    let mut b = BatchBuilder::new(abi);
    let mut rng = ChaCha8Rng::seed_from_u64(0x0b17_5eed);
    let plans = plan_vector(&mut b, &stubs, &mut rng, "abi-probe", &probe_vector(kernel), Placement::End);
    let batch = b.layout(image.arena().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let run = run_batch(backend, &batch).map_err(|e| e.to_string())?;
    let mut findings: Vec<Vec<Finding>> =
        plans.iter().map(|p| crate::cases::verdict::check(p, &batch, &run, abi, image)).collect();
    crate::int_args::diagnose(backend, &batch, &plans, &mut findings, abi, image);
    let mut out: Vec<Finding> = Vec::new();
    for f in findings.iter().flatten().filter(|f| f.class == Class::Abi) {
        for text in reliance_text(&f.text, family, kernel, linux_len_type(image)) {
            if !out.iter().any(|o| o.text == text) {
                out.push(Finding::new(Class::UpperBits, text));
            }
        }
    }
    Ok(out)
}

/// The C type Linux's glue declares `blocks`' `len` with, when the image's `poly1305_init`
/// entry is a Linux glue's init ([`crate::user_kernel::glue_paths::glue_at`]).
fn linux_len_type(image: &Image) -> Option<&'static str> {
    let init = image.entry(contract::POLY1305_INIT)?;
    crate::user_kernel::glue_paths::glue_at(image, init.addr).map(|g| g.len_c_type)
}

/// One text per argument of the diagnosis "tag: poly1305_blocks(...): depends on the upper
/// 32 bits of x2 (int len, passed as 0x...) and x3 (int padbit, passed as 0x...); ...":
/// "poly1305_blocks depends on the upper 32 bits of x2 (u32 len)", with the C type from the
/// contract table (`len`'s from Linux's glue, `linux_len`, when the image is one). Empty when
/// `diagnosis` is not one.
fn reliance_text(diagnosis: &str, family: Family, kernel: Kernel, linux_len: Option<&str>) -> Vec<String> {
    let Some((label, rest)) = diagnosis.split_once(DEPENDS) else { return Vec::new() };
    let Some(function) = label.split('(').next().and_then(|l| l.rsplit(": ").next()).map(str::trim) else {
        return Vec::new();
    };
    let regs = rest.split_once("; ").map_or(rest, |(r, _)| r);
    let mut out = Vec::new();
    for part in regs.split(") and ") {
        let Some((reg, args)) = part.split_once(" (int ") else { continue };
        let Some(name) = args.split(',').next().map(str::trim) else { continue };
        let c_type = contract::contracts(family, kernel)
            .flat_map(|c| c.params.iter())
            .find(|p| p.name == name)
            .map_or("int", |p| p.c_type);
        let c_type = linux_len.filter(|_| name == "len").unwrap_or(c_type);
        out.push(format!(
            "{function} {DEPENDS}{reg} ({c_type} {name}): a probe case with garbage there fails and passes with \
             them clean; the psABI leaves them unspecified (every other case passes them clean, as {family}'s \
             callers do)"
        ));
    }
    out
}

/// For each failing case among `plans` (`findings[i]` not empty) that passes C `int`
/// arguments on an ABI that leaves their upper 32 bits unspecified (x86_64, aarch64; the lab
/// fills them with garbage): re-runs the batch with those bits clean (the low 32 bits
/// sign-extended), first for every `int` argument, then for `ofs` alone and `limit` alone, and
/// puts "depends on the upper 32 bits of rdx (int ofs); the ABI leaves them unspecified" first
/// among the findings of each case that then passes. At most three re-runs of the batch, and
/// none when no such case failed.
pub fn diagnose(
    backend: &mut dyn Backend,
    batch: &Batch,
    plans: &[CasePlan],
    findings: &mut [Vec<Finding>],
    abi: &Abi,
    image: &Image,
) {
    if abi.int32_args != Int32Args::UpperGarbage {
        return;
    }
    let garbage = |b: &Batch, a: &IntArg| {
        let v = b.arg(a.call, a.arg);
        v != clean(v)
    };
    let suspects: Vec<usize> = (0..plans.len())
        .filter(|&i| !findings[i].is_empty() && plans[i].int_args().iter().any(|a| garbage(batch, a)))
        .collect();
    if suspects.is_empty() {
        return;
    }
    let names: Vec<&'static str> = {
        let mut n: Vec<&'static str> = suspects.iter().flat_map(|&i| plans[i].int_args()).map(|a| a.name).collect();
        n.sort_unstable();
        n.dedup();
        n
    };
    let mut left = rerun_clean(backend, batch, plans, &suspects, &names, abi, image);
    // Which argument: each one alone, then the rest needs all of them together.
    for &name in &names {
        if left.is_empty() || names.len() == 1 {
            break;
        }
        let alone = rerun_clean(backend, batch, plans, &left, &[name], abi, image);
        for &i in &alone {
            blame(batch, &plans[i], &mut findings[i], &[name], abi);
        }
        left.retain(|i| !alone.contains(i));
    }
    for i in left {
        blame(batch, &plans[i], &mut findings[i], &names, abi);
    }
}

/// The low 32 bits of `v` sign-extended: an `int` with clean upper bits.
fn clean(v: u64) -> u64 {
    v as u32 as i32 as i64 as u64
}

/// Re-runs `batch` with the `int` arguments called `names` of the cases `which` cleaned;
/// returns the cases of `which` that then pass every check.
fn rerun_clean(
    backend: &mut dyn Backend,
    batch: &Batch,
    plans: &[CasePlan],
    which: &[usize],
    names: &[&str],
    abi: &Abi,
    image: &Image,
) -> Vec<usize> {
    let mut b = batch.clone();
    for &i in which {
        for a in plans[i].int_args().iter().filter(|a| names.contains(&a.name)) {
            b.set_arg(a.call, a.arg, clean(b.arg(a.call, a.arg)));
        }
    }
    let Ok(run) = crate::backend::run_batch(backend, &b) else { return Vec::new() };
    which
        .iter()
        .copied()
        .filter(|&i| crate::cases::verdict::check(&plans[i], &b, &run, abi, image).is_empty())
        .collect()
}

/// Puts the upper-bits finding first among `findings`: the first call of `plan` whose `int`
/// argument called one of `names` had garbage upper bits, the register(s) and the values.
fn blame(batch: &Batch, plan: &CasePlan, findings: &mut Vec<Finding>, names: &[&str], abi: &Abi) {
    let args: Vec<IntArg> = plan.int_args().into_iter().filter(|a| names.contains(&a.name)).collect();
    let Some(first) = args.iter().find(|a| batch.arg(a.call, a.arg) != clean(batch.arg(a.call, a.arg))) else { return };
    let regs: Vec<String> = args
        .iter()
        .filter(|a| a.call == first.call)
        .map(|a| format!("{} (int {}, passed as {:#018x})", abi.args[a.arg], a.name, batch.arg(a.call, a.arg)))
        .collect();
    let text = format!(
        "{}: depends on the upper 32 bits of {}; the ABI leaves them unspecified ({}): the case passes when they \
         are the sign extension of the low 32 bits",
        first.label,
        regs.join(" and "),
        abi.source
    );
    findings.insert(0, Finding::new(Class::Abi, text));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reliance_text_names_function_register_and_c_type() {
        let d = "tag 3: poly1305_blocks_avx2(inp+0, len=96, padbit=1): depends on the upper 32 bits of rcx (int \
                 padbit, passed as 0x4d4ed00e00000001); the ABI leaves them unspecified";
        let t = reliance_text(d, Family::OpenSsl, Kernel::Poly1305, None).join("\n");
        assert!(t.starts_with("poly1305_blocks_avx2 depends on the upper 32 bits of rcx (unsigned int padbit)"), "{t}");
        assert!(reliance_text("no diagnosis here", Family::OpenSsl, Kernel::Poly1305, None).is_empty());
        let d = "tag 3: poly1305_blocks_neon(inp+0, len=96, padbit=1): depends on the upper 32 bits of x2 (int \
                 len, passed as 0x4d4ed00e00000060) and x3 (int padbit, passed as 0x0000000700000001); the ABI \
                 leaves them unspecified (AAPCS64)";
        let t = reliance_text(d, Family::OpenSsl, Kernel::Poly1305, Some("u32"));
        assert_eq!(t.len(), 2, "{t:?}");
        assert!(t[0].starts_with("poly1305_blocks_neon depends on the upper 32 bits of x2 (u32 len): "), "{t:?}");
        assert!(t[1].starts_with("poly1305_blocks_neon depends on the upper 32 bits of x3 (unsigned int padbit)"));
    }
}
