//! `lab list`: variants, backends, and which backend runs which variant.

use kernel_lab::backend::BackendKind;
use kernel_lab::variant::{Kernel, VARIANTS};

pub(crate) fn list_cmd() -> i32 {
    super::out::print(&list_text());
    0
}

/// The table `lab list` prints.
fn list_text() -> String {
    let mut s = String::new();
    let mut println = |line: String| {
        s.push_str(&line);
        s.push('\n');
    };
    println(format!("{:<12} {:<8} {:<34} {:<46} backends", "variant", "arch", "ISA", "qemu -cpu"));
    for v in &VARIANTS {
        println(format!("{:<12} {:<8} {:<34} {:<46}", v.name, v.arch.name(), v.isa, v.qemu_cpu));
        for b in BackendKind::ALL {
            match b.supports(v) {
                Ok(()) if b == BackendKind::Unicorn && v.zbb => {
                    println(format!("{:>14} {:<8} yes (Zbb emulated on the illegal-instruction trap)", "", b.name()))
                }
                Ok(()) => println(format!("{:>14} {:<8} yes", "", b.name())),
                Err(why) => println(format!("{:>14} {:<8} no: {why}", "", b.name())),
            }
        }
    }
    println(format!(
        "\nkernels: {}",
        Kernel::ALL.map(|k| format!("{} ({})", k.name(), k.symbols().join(", "))).join("; ")
    ));
    s
}
