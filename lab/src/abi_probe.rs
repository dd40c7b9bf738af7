//! The reliance probe of [`UpperBits::Warn`]: under that policy every case passes its `int`
//! arguments clean, so the value checks mean what they say; this one probe case per image
//! passes garbage in their upper 32 bits (as the psABI allows: SysV x86-64 §3.2.3, AAPCS64
//! §6.8.2) and, when it fails and passes again with them clean ([`crate::diagnose::upper_bits`]),
//! names each argument the kernel reads whole: one [`Class::UpperBits`] finding per image and
//! argument.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::abi::{Abi, Int32Args, UpperBits};
use crate::backend::{run_batch, Backend};
use crate::batch::{BatchBuilder, Placement};
use crate::cases::plan::{plan_vector, Stubs};
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
    crate::diagnose::upper_bits(backend, &batch, &plans, &mut findings, abi, image);
    let mut out: Vec<Finding> = Vec::new();
    for f in findings.iter().flatten().filter(|f| f.class == Class::Abi) {
        let Some(text) = reliance_text(&f.text, family, kernel) else { continue };
        if !out.iter().any(|o| o.text == text) {
            out.push(Finding::new(Class::UpperBits, text));
        }
    }
    Ok(out)
}

/// "poly1305_blocks depends on the upper 32 bits of rcx (unsigned int padbit)" from the
/// diagnosis "tag: poly1305_blocks(...): depends on the upper 32 bits of rcx (int padbit,
/// passed as 0x...)...", with the C type from the contract table.
fn reliance_text(diagnosis: &str, family: Family, kernel: Kernel) -> Option<String> {
    let (label, rest) = diagnosis.split_once(DEPENDS)?;
    let function = label.split('(').next()?.rsplit(": ").next()?.trim();
    let (reg, args) = rest.split_once(" (int ")?;
    let name = args.split(',').next()?.trim();
    let c_type = contract::contracts(family, kernel)
        .flat_map(|c| c.params.iter())
        .find(|p| p.name == name)
        .map_or("int", |p| p.c_type);
    Some(format!(
        "{function} depends on the upper 32 bits of {reg} ({c_type} {name}): a probe case with garbage there fails \
         and passes with them clean; the psABI leaves them unspecified (every other case passes them clean, as \
         {family}'s callers do)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reliance_text_names_function_register_and_c_type() {
        let d = "tag 3: poly1305_blocks_avx2(inp+0, len=96, padbit=1): depends on the upper 32 bits of rcx (int \
                 padbit, passed as 0x4d4ed00e00000001); the ABI leaves them unspecified";
        let t = reliance_text(d, Family::OpenSsl, Kernel::Poly1305).unwrap();
        assert!(t.starts_with("poly1305_blocks_avx2 depends on the upper 32 bits of rcx (unsigned int padbit)"), "{t}");
        assert_eq!(reliance_text("no diagnosis here", Family::OpenSsl, Kernel::Poly1305), None);
    }
}
