//! `lab list`: variants, backends, and which backend runs which variant.

use clap::Args;
use kernel_lab::backend::BackendKind;
use kernel_lab::exit::ExitCode;
use kernel_lab::variant::{Kernel, VARIANTS};

use super::options::TextOrJson;

#[derive(Args)]
pub(crate) struct ListArgs {
    /// Output format: the human table, or JSON (variants with their backends, kernels).
    #[arg(long, value_enum, default_value = "human")]
    format: TextOrJson,
}

pub(crate) fn list_cmd(args: &ListArgs) -> ExitCode {
    let text = if args.format == TextOrJson::Json { list_json() + "\n" } else { list_text() };
    super::out::print(&text);
    ExitCode::Passed
}

/// Variants (name, arch, ISA, qemu -cpu, which backend runs them and why not) and kernels.
fn list_json() -> String {
    let variants: Vec<serde_json::Value> = VARIANTS
        .iter()
        .map(|v| {
            let backends: Vec<serde_json::Value> = BackendKind::ALL
                .iter()
                .map(|b| match b.supports(v) {
                    Ok(()) => serde_json::json!({ "backend": b.name(), "runs": true }),
                    Err(why) => serde_json::json!({ "backend": b.name(), "runs": false, "why": why }),
                })
                .collect();
            let vector_length = v.vector_length().map(|vl| {
                serde_json::json!({
                    "name": vl.name, "defaults": vl.defaults, "min_bits": vl.bits.start(), "max_bits": vl.bits.end(),
                })
            });
            serde_json::json!({
                "name": v.name, "arch": v.arch.name(), "isa": v.isa, "qemu_cpu": v.qemu_cpu, "backends": backends,
                "vector_length": vector_length,
            })
        })
        .collect();
    let kernels: Vec<serde_json::Value> =
        Kernel::ALL.iter().map(|k| serde_json::json!({ "name": k.name(), "symbols": k.symbols() })).collect();
    let contracts: Vec<serde_json::Value> = kernel_lab::contract::CONTRACTS
        .iter()
        .map(|c| serde_json::json!({ "symbol": c.symbol, "family": c.family.name(), "kernel": c.kernel.name() }))
        .collect();
    let body = serde_json::json!({ "variants": variants, "kernels": kernels, "contracts": contracts });
    // Serialized from the envelope itself: a `Value` map would sort the envelope's keys away
    // from the front.
    serde_json::to_string(&kernel_lab::vocab::envelope::Envelope::new("list", body)).unwrap_or_default()
}

/// The table `lab list` prints.
fn list_text() -> String {
    let mut s = String::new();
    let mut println = |line: String| {
        s.push_str(&line);
        s.push('\n');
    };
    println(format!("{:<17} {:<8} {:<34} {:<46} backends", "variant", "arch", "ISA", "qemu -cpu"));
    for v in &VARIANTS {
        println(format!("{:<17} {:<8} {:<34} {:<46}", v.name, v.arch.name(), v.isa, v.qemu_cpu));
        for b in BackendKind::ALL {
            match b.supports(v) {
                Ok(()) if b == BackendKind::Unicorn && v.zbb => {
                    println(format!("{:>19} {:<8} yes (Zbb emulated on the illegal-instruction trap)", "", b.name()))
                }
                Ok(()) if b == BackendKind::Qemu && v.vector_length().is_some() => {
                    let vl = v.vector_length().expect("checked");
                    let each: Vec<String> = vl.defaults.iter().map(u32::to_string).collect();
                    println(format!(
                        "{:>19} {:<8} yes, at {} {} (--vlen narrows)",
                        "",
                        b.name(),
                        vl.name,
                        each.join(", ")
                    ))
                }
                Ok(()) => println(format!("{:>19} {:<8} yes", "", b.name())),
                Err(why) => println(format!("{:>19} {:<8} no: {why}", "", b.name())),
            }
        }
    }
    println(
        "\nNEON (Advanced SIMD) is part of ARMv8-A: every aarch64 row may use it. qemu 7.2 has SVE2 only in `-cpu \
         max`, which cannot turn features off: the ISA scan keeps an SVE2 build to what it declares."
            .into(),
    );
    println(format!(
        "kernels: {}",
        Kernel::ALL.map(|k| format!("{} ({})", k.name(), k.symbols().join(", "))).join("; ")
    ));
    let families = kernel_lab::contract::Family::ALL.map(|f| {
        let symbols: Vec<&str> =
            kernel_lab::contract::CONTRACTS.iter().filter(|c| c.family == f).map(|c| c.symbol).collect();
        format!("{f} ({})", symbols.join(", "))
    });
    println(format!(
        "contracts: {} - an image runs each kernel through the first family it defines completely (docs/contracts.md)",
        families.join("; ")
    ));
    s
}
