//! `lab list`: variants, backends, and which backend runs which variant.

use kernel_lab::backend::BackendKind;
use kernel_lab::variant::{Kernel, VARIANTS};

pub(crate) fn list_cmd() -> i32 {
    println!("{:<12} {:<8} {:<34} {:<46} backends", "variant", "arch", "ISA", "qemu -cpu");
    for v in &VARIANTS {
        println!("{:<12} {:<8} {:<34} {:<46}", v.name, v.arch.name(), v.isa, v.qemu_cpu);
        for b in BackendKind::ALL {
            match b.supports(v) {
                Ok(()) if b == BackendKind::Unicorn && v.zbb => {
                    println!("{:>14} {:<8} yes (Zbb emulated on the illegal-instruction trap)", "", b.name())
                }
                Ok(()) => println!("{:>14} {:<8} yes", "", b.name()),
                Err(why) => println!("{:>14} {:<8} no: {why}", "", b.name()),
            }
        }
    }
    println!("\nkernels: {}", Kernel::ALL.map(|k| format!("{} ({})", k.name(), k.symbols().join(", "))).join("; "));
    0
}
