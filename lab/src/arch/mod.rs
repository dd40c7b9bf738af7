//! Per-architecture facts, one row per architecture ([`ArchSpec`], one file each:
//! [`riscv64`], [`aarch64`], [`x86_64`]): toolchain triple and flags, the ISA and its extensions
//! (llvm-objdump `--mattr`, qemu `-cpu` properties, Unicorn support, x86 CPUID features), the
//! system-call instruction and names, Unicorn's engine mode, registers and exceptions, the psABI
//! table, the qemu-user binary, llvm-mca's triple and models, and the instruction classes of
//! `lab bench`'s mix.
//!
//! This folder owns every `match` on [`Arch`]: [`Arch::spec`] is the only one, and everything else
//! reads the row. A new architecture is one file here, one arm in [`Arch::spec`] and its kernels
//! (`kernels/<arch>/`); `tests/arch_rows.rs` fails on a `match` over the architecture elsewhere.

pub mod aarch64;
pub mod capability;
pub mod riscv64;
pub mod x86_64;

use iced_x86::CpuidFeature;

use crate::vocab::abi::Abi;
use crate::vocab::insn::{Insn, InsnClass};
use crate::vocab::tool::Tool;

pub use crate::vocab::arch::Arch;

impl Arch {
    /// The architecture's row: every per-architecture fact the lab uses.
    pub fn spec(self) -> &'static ArchSpec {
        match self {
            Arch::Riscv64 => &riscv64::SPEC,
            Arch::Aarch64 => &aarch64::SPEC,
            Arch::X86_64 => &x86_64::SPEC,
        }
    }

    /// Folder name under `kernels/`, also the name used on the command line.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Parses a command-line name (`riscv64`, `aarch64`, `x86_64`).
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Name of the qemu-user binary that runs this architecture (Debian package `qemu-user`).
    pub fn qemu_binary(self) -> &'static str {
        self.spec().qemu.program
    }

    /// The architecture this `lab` binary itself runs on, if it is one of the guests.
    pub fn host() -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.spec().rust_arch == std::env::consts::ARCH)
    }
}

named_values!(Arch);

/// Everything the lab knows about one architecture.
#[derive(Debug)]
pub struct ArchSpec {
    /// The enum value this row describes.
    pub arch: Arch,
    /// Folder under `kernels/`, command-line and report name.
    pub name: &'static str,
    /// `std::env::consts::ARCH` of a host of this architecture (the native backend).
    pub rust_arch: &'static str,
    /// ELF `e_machine` as the `object` crate names it (image loading).
    pub elf: object::Architecture,
    /// C preprocessor condition true when assembling for it (`lab_protocol.h`).
    pub c_guard: &'static str,
    /// clang `--target` triple.
    pub clang_triple: &'static str,
    /// Extra clang flags for every source of this architecture.
    pub clang_flags: &'static [&'static str],
    /// The base ISA and its extensions.
    pub isa: IsaSpec,
    /// Extra `llvm-objdump` options (x86: Intel syntax, destination first).
    pub objdump_args: &'static [&'static str],
    /// First line of assembly text handed to `llvm-mca` (x86: declares the Intel syntax the
    /// listing is in).
    pub asm_prologue: &'static str,
    /// The system-call instruction.
    pub syscall: SyscallSpec,
    /// The calling convention.
    pub abi: &'static Abi,
    /// The qemu-user binary and its Debian package.
    pub qemu: Tool,
    /// Unicorn's engine for it.
    pub unicorn: UnicornSpec,
    /// llvm-mca `-mtriple` and the scheduling models `lab bench` predicts by default.
    pub mca: McaSpec,
    /// `lab bench`'s straight-line spin loop (`lab/guest/<arch>/spin.S`).
    pub spin_source: &'static str,
    /// The class of one instruction for `lab bench`'s mix (see [`InsnClass`]).
    pub classify: fn(&Insn) -> InsnClass,
    /// OpenSSL's scalar Poly1305 context on this architecture (docs/contracts.md).
    pub openssl_poly1305: crate::vocab::poly_ctx::PolyCtx,
    /// Alignment rules the emulators do not model ([`crate::align`]).
    pub align: AlignSpec,
    /// OpenSSL's capability word and Poly1305 code paths ([`capability`]).
    pub capability: capability::CapabilitySpec,
    /// One instruction that always traps (the body of a stub the lab defines for a symbol
    /// only an untaken dispatch path needs).
    pub capability_trap: &'static str,
    /// Capturing HotSpot's stubs of this architecture ([`crate::hotspot`]).
    pub hotspot: HotSpotSpec,
}

/// The decoders `crate::hotspot::check` has for captured code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StubDecoder {
    /// iced-x86 (x86-64).
    IcedX86,
    /// The lab's decoder of A64's PC-relative classes (`crate::hotspot::check_a64`).
    A64,
}

/// How `lab capture` treats a JVM of one architecture ([`crate::hotspot`]).
#[derive(Debug)]
pub struct HotSpotSpec {
    /// Java's `os.arch` values of a JVM of this architecture (`amd64` on x86_64 Linux).
    pub os_arch: &'static [&'static str],
    /// Where a JDK of this architecture comes from on Debian 12, for `lab doctor`.
    pub jdk: &'static str,
    /// Debian's name of the architecture (`amd64`, `arm64`, `riscv64`): the suffix of a
    /// multiarch JDK's folder, `/usr/lib/jvm/java-17-openjdk-arm64`.
    pub debian_arch: &'static str,
    /// The start of a capture's variant name (`hotspot`, `hotspot-aarch64`): x86_64 captures,
    /// the first the lab took, keep the plain prefix so saved replay lines stay valid.
    pub variant_prefix: &'static str,
    /// The decoder that checks a captured stub (whole instructions, references outside it, the
    /// ISA it needs: `crate::hotspot::check`); `None` where the lab has none yet (its stubs are
    /// refused).
    pub check: Option<StubDecoder>,
    /// The byte filling gaps between captured stubs in the object: a trap when executed.
    pub gap_fill: u8,
}

/// Alignment rules the lab checks itself, because QEMU (qemu-user and Unicorn) does not model
/// them: the stack pointer at sp-based accesses and at the kernel's own calls, and the operand
/// of aligned-only instructions ([`crate::align`]: the image scan's static sp tracking, the
/// Unicorn backend's hooks, the names of alignment faults on every backend).
#[derive(Debug)]
pub struct AlignSpec {
    /// What an instruction does with the stack pointer ([`SpUse`]).
    pub sp_use: fn(&Insn) -> SpUse,
    /// sp mod 16 at a kernel's first instruction, in bytes (x86_64: 8, the caller's `call`
    /// pushed the return address; elsewhere 0).
    pub entry_sp: u64,
    /// Why sp must be 16-byte aligned at an sp-based load or store, with the source; `None`
    /// where neither the ISA nor the psABI requires it at an access.
    pub access_rule: Option<&'static str>,
    /// Why sp must be 16-byte aligned at a call the kernel makes, with the source; `None` where
    /// only accesses are checked.
    pub call_rule: Option<&'static str>,
    /// The alignment in bytes an aligned-only instruction's memory operand needs (`movdqa`: 16,
    /// `ldxr x0`: 8, `lr.d`: 8); `None` for an instruction that takes any address.
    pub aligned_only: fn(&Insn) -> Option<u64>,
    /// What happens to a misaligned operand of an aligned-only instruction, with the source.
    pub aligned_rule: &'static str,
    /// The effective address of an instruction's memory operand from register values by name
    /// (`rdi`), for the engines that do not check the alignment themselves (Unicorn's x86
    /// engine) and for faults that carry no address (x86 `#GP`); `None` where the engines
    /// trap aligned-only instructions themselves with the address (aarch64 `FAR_EL1`,
    /// riscv64 `mtval`, `si_addr`).
    pub address: Option<OperandAddress>,
    /// The registers of a fault reply's register words, in order (the x86_64 driver copies
    /// `gregs[0..16]` of the signal's `ucontext_t`); empty when the driver sends none.
    pub fault_regs: &'static [&'static str],
    /// Unicorn register ids by name, for [`address`](Self::address) under Unicorn.
    pub unicorn_regs: &'static [(&'static str, i32)],
}

/// The address of an instruction's memory operand, given register values by name (`None`
/// when a register it needs is not known).
pub type OperandAddress = fn(&Insn, &mut dyn FnMut(&str) -> Option<u64>) -> Option<u64>;

/// What an instruction does with the stack pointer, for the sp alignment checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpUse {
    /// Whether sp must be 16-byte aligned when the instruction starts, and why.
    pub check: Option<SpCheck>,
    /// What sp is after it, relative to before (for the static tracking).
    pub then: SpEffect,
}

impl SpUse {
    /// Neither checks nor moves sp.
    pub const NONE: SpUse = SpUse { check: None, then: SpEffect::Keep };
}

/// Where sp alignment is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpCheck {
    /// A load or store with sp as its base register.
    Access,
    /// A call (the callee's entry).
    Call,
}

/// How an instruction moves sp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpEffect {
    /// Not at all (or back where it was, as a call that returns).
    Keep,
    /// By this many bytes (negative: down).
    Adjust(i64),
    /// To a value the static tracking cannot follow, or control leaves the straight line
    /// (an unconditional jump or a return).
    Unknown,
}

/// The base ISA the default variant builds for, and the extensions a build may add.
#[derive(Debug)]
pub struct IsaSpec {
    /// ISA-string base (`rv64gc`, `armv8-a`, `x86-64`).
    pub base: &'static str,
    /// `llvm-objdump --mattr` that decodes exactly the base (LLVM 14 feature names); empty on
    /// x86_64, whose disassembler ignores features.
    pub base_mattr: &'static str,
    /// qemu-user `-cpu` model the properties are added to.
    pub qemu_cpu_model: &'static str,
    /// How the static scan decides an instruction is inside the declared ISA.
    pub legality: Legality,
    /// Extensions a build may declare, in ISA-string order.
    pub extensions: &'static [IsaExtension],
    /// Named bundles an ISA string may start with instead of `base` (x86-64 psABI
    /// micro-architecture levels `x86-64-v2`..`-v4`); `lab run --isa` (user_kernel::isa_decl).
    pub levels: &'static [IsaLevel],
    /// How extensions join the base in clang's `-march` (`rv64gc_zbb`, `armv8-a+crypto`); `None`:
    /// `-march` takes the level only and each extension is a clang flag `-m<name>` (x86_64).
    pub march_separator: Option<&'static str>,
    /// The vector length of the architecture's scalable vector extensions as a run dimension
    /// (RVV's VLEN, SVE's VL): `None` where the ISA has no implementation-defined vector length.
    pub vector_length: Option<VectorLengthSpec>,
}

/// An implementation-defined vector length as data: which extensions have one, the lengths an
/// implementation may have, the lengths a run covers by default, and how one becomes qemu-user
/// `-cpu` text. Every qemu row of an image whose ISA has one of [`extensions`](Self::extensions)
/// runs once per length (`lab run --vlen`).
#[derive(Debug)]
pub struct VectorLengthSpec {
    /// Its name in reports and findings (`VLEN`, `SVE VL`).
    pub name: &'static str,
    /// Its key beside the backend in a row (`qemu vlen=256`, `qemu sve-vl=256`), in bits.
    pub column: &'static str,
    /// The extensions (names of [`IsaSpec::extensions`] rows) whose code depends on it.
    pub extensions: &'static [&'static str],
    /// The smallest and largest length in bits qemu-user 7.2 provides.
    pub bits: std::ops::RangeInclusive<u32>,
    /// Which lengths in [`bits`](Self::bits) exist.
    pub step: LengthStep,
    /// The lengths a run covers when `--vlen` does not narrow it, in bits.
    pub defaults: &'static [u32],
    /// `-cpu` properties for a length, `{bits}` or `{bytes}` replaced by it (`vlen={bits}`).
    pub qemu_property: &'static str,
    /// `-cpu` properties added whenever one of the extensions is on, whatever the length
    /// (RVV: `vext_spec=v1.0,elen=64`).
    pub qemu_fixed: &'static str,
    /// What the psABI says of the vector state at a call, for the driver and its findings.
    pub source: &'static str,
    /// The sentence naming a kernel whose vector instruction trapped because the driver entered
    /// it with no vector configuration (RVV: vtype.vill set); `None` where the driver does not
    /// poison it. The driver defines the symbol [`VILL_SYMBOL`] when it does.
    pub unconfigured: Option<&'static str>,
    /// Instructions that round by a control register the psABI leaves unspecified at entry, and
    /// the instructions that set it ([`RoundingSpec`]); `None` where there are none.
    pub rounding: Option<RoundingSpec>,
    /// A freestanding program (`_start`, assembly) that exits with the vector length in units
    /// of [`probe_unit_bits`](Self::probe_unit_bits): `lab doctor` runs it on qemu at every
    /// default length to prove the `-cpu` text gives the length asked for.
    pub probe: &'static str,
    /// Bits per unit of the probe's exit status (RVV `vlenb`: 8; SVE `cntd`: 64).
    pub probe_unit_bits: u32,
}

/// Vector instructions whose result depends on a rounding-mode register the psABI leaves
/// unspecified at a call (RVV's `vxrm`): an image that uses them and never writes the register
/// relies on its caller's mode (`lab run` warns; the driver poisons the register).
#[derive(Debug)]
pub struct RoundingSpec {
    /// The register, as the disassembler prints it (`vxrm`).
    pub register: &'static str,
    /// Mnemonic prefixes of the instructions that round by it (`vssrl` covers `vssrl.vi`).
    pub users: &'static [&'static str],
    /// Registers whose write sets it (`vxrm`, and `vcsr`, which holds it).
    pub written_through: &'static [&'static str],
    /// Why relying on it is wrong, with the source.
    pub rule: &'static str,
}

/// One vector length a row runs at: `qemu vlen=256` in reports, `--vlen 256` in replays.
#[derive(Debug, Clone, Copy)]
pub struct VectorLength {
    /// Whose length (RVV's VLEN, SVE's VL).
    pub spec: &'static VectorLengthSpec,
    /// The length in bits.
    pub bits: u32,
}

impl VectorLength {
    /// The `-cpu` properties selecting it ([`VectorLengthSpec::qemu_properties`]).
    pub fn qemu_properties(&self) -> String {
        self.spec.qemu_properties(self.bits)
    }
}

impl PartialEq for VectorLength {
    fn eq(&self, other: &Self) -> bool {
        (self.spec.name, self.bits) == (other.spec.name, other.bits)
    }
}

impl Eq for VectorLength {}

impl std::fmt::Display for VectorLength {
    /// `vlen=256` (the spec's [`column`](VectorLengthSpec::column) and the bits).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.spec.column, self.bits)
    }
}

/// A symbol the driver defines when it enters every call with the vector configuration invalid
/// (riscv64: `vtype.vill` set; kernels/riscv64/driver.S).
pub const VILL_SYMBOL: &str = "lab_vector_entry_vill";

/// Which lengths exist between a [`VectorLengthSpec`]'s bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthStep {
    /// Powers of two (RVV: VLEN is a power of two, RISC-V V spec 1.0 §2).
    PowerOfTwo,
    /// Multiples of this many bits (SVE: multiples of 128, Arm ARM "ZCR_EL1.LEN").
    Multiple(u32),
}

impl VectorLengthSpec {
    /// Whether `bits` is a length this spec allows; `Err` says the rule, naming the value.
    ///
    /// # Errors
    /// The value and the rule (`VLEN 384: must be a power of two in 128..=1024`).
    pub fn check(&self, bits: u32) -> Result<(), String> {
        let stepped = match self.step {
            LengthStep::PowerOfTwo => bits.is_power_of_two(),
            LengthStep::Multiple(m) => bits.is_multiple_of(m),
        };
        if stepped && self.bits.contains(&bits) {
            return Ok(());
        }
        let rule = match self.step {
            LengthStep::PowerOfTwo => "a power of two".to_string(),
            LengthStep::Multiple(m) => format!("a multiple of {m}"),
        };
        Err(format!("{} {bits}: must be {rule} in {}..={} bits", self.name, self.bits.start(), self.bits.end()))
    }

    /// The `-cpu` properties selecting `bits` (`vlen=256`, `sve-default-vector-length=32`).
    pub fn qemu_properties(&self, bits: u32) -> String {
        self.qemu_property.replace("{bits}", &bits.to_string()).replace("{bytes}", &(bits / 8).to_string())
    }

    /// This spec at `bits` (already [`check`](Self::check)ed).
    pub fn at(&'static self, bits: u32) -> VectorLength {
        VectorLength { spec: self, bits }
    }

    /// Whether an ISA with these extensions (row names) has this vector length.
    pub fn applies(&self, extensions: &[&str]) -> bool {
        extensions.iter().any(|e| self.extensions.contains(e))
    }
}

/// How instructions outside a declared ISA are found.
/// A named ISA level: the extensions it implies (names of [`IsaSpec::extensions`] rows).
#[derive(Debug)]
pub struct IsaLevel {
    /// As written first in an ISA string (`x86-64-v3`).
    pub name: &'static str,
    /// Extension rows it turns on.
    pub implies: &'static [&'static str],
}

#[derive(Debug)]
pub enum Legality {
    /// `llvm-objdump --mattr=<declared>` prints `<unknown>` for them.
    Mattr,
    /// The disassembler ignores features: each instruction's CPUID features (iced-x86) must be
    /// in this baseline or in a declared extension's [`IsaExtension::cpuid`].
    Cpuid(&'static [CpuidFeature]),
}

/// One ISA extension as data: how each tool turns it on.
#[derive(Debug)]
pub struct IsaExtension {
    /// ISA-string name (`zbb`, `crc`, `bmi2`), lower case.
    pub name: &'static str,
    /// What it is, with the document that defines it.
    pub doc: &'static str,
    /// llvm-objdump `--mattr` feature(s) that decode it (`+zbb`); empty on x86_64.
    pub mattr: &'static str,
    /// Whether and how qemu-user provides it.
    pub qemu: QemuSupport,
    /// Whether the Unicorn backend can run code that uses it.
    pub unicorn: UnicornSupport,
    /// x86: the CPUID features its instructions need (iced-x86 names); empty elsewhere.
    pub cpuid: &'static [CpuidFeature],
    /// The flag `/proc/cpuinfo` lists when the host CPU has it (the `native` backend of a
    /// user's declared ISA).
    pub cpuinfo: &'static str,
}

/// How qemu-user (7.2, `-cpu` [`IsaSpec::qemu_cpu_model`]) provides an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QemuSupport {
    /// A `-cpu` property turns it on or off (`zbb` in `rv64,zbb=true`).
    Property {
        /// Property name.
        name: &'static str,
        /// Whether qemu turns it on by default (then a build without it says `=false`).
        default_on: bool,
    },
    /// The CPU model always has it and cannot turn it off: the static scan alone keeps a
    /// build without it honest.
    InModel,
    /// Only this other `-cpu` model has it (aarch64 SVE2: `max`), and that model cannot turn
    /// its other features off: the static scan alone keeps the build to the declared ISA.
    Model(&'static str),
    /// The CPU model lacks it; the reason, for a skip.
    Missing(&'static str),
}

/// Whether Unicorn 2.1.5 runs an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnicornSupport {
    /// Unicorn decodes and runs it.
    Decoded,
    /// Unicorn does not, the lab emulates it on the illegal-instruction exception
    /// (`backend/unicorn/zbb.rs`).
    Emulated,
    /// Unicorn cannot run it; the reason, for a skip.
    Missing(&'static str),
}

impl IsaSpec {
    /// The extension called `name` (case-insensitive), if this architecture has it.
    pub fn extension(&self, name: &str) -> Option<&'static IsaExtension> {
        self.extensions.iter().find(|e| e.name.eq_ignore_ascii_case(name))
    }

    /// `llvm-objdump --mattr` decoding exactly the base plus `on`.
    pub fn mattr(&self, on: &[&IsaExtension]) -> String {
        let parts = std::iter::once(self.base_mattr).chain(on.iter().map(|e| e.mattr));
        parts.filter(|p| !p.is_empty()).collect::<Vec<_>>().join(",")
    }

    /// `llvm-objdump --mattr` decoding the base and every extension: prints any instruction.
    pub fn wide_mattr(&self) -> String {
        self.mattr(&self.extensions.iter().collect::<Vec<_>>())
    }

    /// qemu-user `-cpu` for the base plus `on`: every extension qemu turns on by default and
    /// every declared one is named, so the guest CPU has exactly the declared ISA; an
    /// extension only another model has ([`QemuSupport::Model`]) switches to that model.
    pub fn qemu_cpu(&self, on: &[&IsaExtension]) -> String {
        let model = on.iter().find_map(|e| match e.qemu {
            QemuSupport::Model(m) => Some(m),
            _ => None,
        });
        let mut cpu = model.unwrap_or(self.qemu_cpu_model).to_string();
        for e in self.extensions {
            let QemuSupport::Property { name, default_on } = e.qemu else { continue };
            let wanted = on.iter().any(|o| o.name == e.name);
            if wanted || default_on {
                cpu.push_str(&format!(",{name}={wanted}"));
            }
        }
        let names: Vec<&str> = on.iter().map(|e| e.name).collect();
        if let Some(vl) = self.vector_length.as_ref().filter(|vl| vl.applies(&names) && !vl.qemu_fixed.is_empty()) {
            cpu.push_str(&format!(",{}", vl.qemu_fixed));
        }
        cpu
    }

    /// The vector length of an ISA with these extensions (row names), if it has one.
    pub fn vector_length_of(&self, extensions: &[&str]) -> Option<&VectorLengthSpec> {
        self.vector_length.as_ref().filter(|vl| vl.applies(extensions))
    }
}

impl IsaSpec {
    /// Why Unicorn 2.1.5 cannot run code using `on`, naming the extensions grouped by reason
    /// ("cannot provide avx, avx2 (VEX-encoded: ...)"), if it cannot.
    pub fn unicorn_lacks(&self, on: &[&IsaExtension]) -> Option<String> {
        lacks(on.iter().filter_map(|e| match e.unicorn {
            UnicornSupport::Missing(why) => Some((e.name, why)),
            _ => None,
        }))
    }

    /// Why qemu-user 7.2 cannot provide `on`, if it cannot.
    pub fn qemu_lacks(&self, on: &[&IsaExtension]) -> Option<String> {
        lacks(on.iter().filter_map(|e| match e.qemu {
            QemuSupport::Missing(why) => Some((e.name, why)),
            _ => None,
        }))
    }

    /// Why a host whose `/proc/cpuinfo` lists `host_flags` cannot run code using `on` (each
    /// extension looked up under its Linux name, [`IsaExtension::cpuinfo`]), if it cannot.
    pub fn host_lacks(&self, on: &[&IsaExtension], host_flags: &[String]) -> Option<String> {
        let missing: Vec<String> = on
            .iter()
            .filter(|e| !host_flags.iter().any(|f| f == e.cpuinfo))
            .map(|e| if e.cpuinfo == e.name { e.name.to_string() } else { format!("{} (`{}`)", e.name, e.cpuinfo) })
            .collect();
        (!missing.is_empty())
            .then(|| format!("cannot provide {}: this host's CPU lacks it (/proc/cpuinfo)", missing.join(", ")))
    }

    /// The extension rows named `names` (unknown names are left out: the variant table's unit
    /// test keeps its names known).
    pub fn rows(&self, names: &[&str]) -> Vec<&'static IsaExtension> {
        names.iter().filter_map(|n| self.extension(n)).collect()
    }

    /// clang flags beyond `-march=<march>` that turn `on` on where `-march` takes no extensions
    /// (x86_64: `-mavx512ifma` for an extension the level `march` does not imply); empty where
    /// extensions join `-march` itself ([`IsaSpec::march_separator`]).
    pub fn clang_flags(&self, march: &str, on: &[&IsaExtension]) -> Vec<String> {
        if self.march_separator.is_some() {
            return Vec::new();
        }
        let implied = self.levels.iter().find(|l| l.name == march).map_or(&[][..], |l| l.implies);
        on.iter().filter(|e| !implied.contains(&e.name)).map(|e| clang_flag(e.name)).collect()
    }
}

/// clang's option turning on the x86_64 extension `name`: `-m<name>`, but `-mbmi` for BMI1
/// (clang's spelling).
pub fn clang_flag(name: &str) -> String {
    match name {
        "bmi1" => "-mbmi".to_owned(),
        n => format!("-m{n}"),
    }
}

/// "cannot provide zbkb, zknh (<reason>)", grouping extensions by reason.
fn lacks(items: impl Iterator<Item = (&'static str, &'static str)>) -> Option<String> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, why) in items {
        match groups.iter_mut().find(|(w, _)| *w == why) {
            Some((_, names)) => names.push(name),
            None => groups.push((why, vec![name])),
        }
    }
    let parts: Vec<String> = groups.iter().map(|(why, names)| format!("{} ({why})", names.join(", "))).collect();
    (!parts.is_empty()).then(|| format!("cannot provide {}", parts.join("; ")))
}

/// The architecture's system-call instruction.
#[derive(Debug)]
pub struct SyscallSpec {
    /// Mnemonics (as llvm-objdump prints them) that make a system call.
    pub mnemonics: &'static [&'static str],
    /// Bytes of the instruction the drivers use (`ecall`, `svc #0`: 4; `syscall`: 2).
    pub len: u64,
    /// The Linux name of a system-call number (crate `syscalls`).
    pub name: fn(usize) -> Option<&'static str>,
    /// Every encoding of a system-call instruction, for the search at every position an
    /// instruction may start (`crate::hidden_syscall`).
    pub encodings: &'static [SyscallEncoding],
    /// Bytes between the positions an instruction may start at (x86_64 1, riscv64 with C 2,
    /// aarch64 4).
    pub step: usize,
}

/// One system-call encoding: its name and bytes as they lie in memory (little-endian), with a
/// mask of the bits that must match (aarch64 `svc` carries a 16-bit immediate).
#[derive(Debug)]
pub struct SyscallEncoding {
    /// The instruction (`syscall`, `ecall`, `svc`).
    pub name: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
    /// The bits of each byte that must equal `bytes`.
    pub mask: &'static [u8],
}

/// Unicorn's engine for one architecture.
#[derive(Debug)]
pub struct UnicornSpec {
    /// Engine architecture.
    pub arch: unicorn_engine::Arch,
    /// Engine mode.
    pub mode: unicorn_engine::Mode,
    /// Registers set once after the engine is created: (register id, value, why).
    pub init: &'static [(i32, u64, &'static str)],
    /// The stack-pointer register id.
    pub sp: i32,
    /// The callee-saved registers `lab_batch` saves in its frame (integer and floating point,
    /// [`crate::vocab::abi::Abi`]'s order): zero at each entry, as the request loop of a process
    /// guest leaves them (issue 28; after a fault they would be the kernel's).
    pub callee_saved: &'static [i32],
    /// Where a call's return address goes.
    pub return_address: ReturnAddress,
    /// Instructions Unicorn reports through an instruction hook, not an interrupt (x86
    /// `syscall`/`sysenter`): each is a system call.
    pub syscall_hooks: &'static [unicorn_engine::X86Insn],
    /// What each interrupt number means (QEMU `EXCP_*`, RISC-V `mcause`).
    pub interrupts: &'static [UcInterrupt],
    /// Code Unicorn is known to compute wrongly whatever its extension: a call that reaches it
    /// stops there, not run past it (`isa::unicorn_stops`).
    pub refuse: Option<UnicornRefusal>,
}

/// Instructions the Unicorn backend does not run (a call stops before them), and why.
#[derive(Debug)]
pub struct UnicornRefusal {
    /// Whether an instruction is one of them.
    pub insn: fn(&Insn) -> bool,
    /// What they are, for the message (`VEX/EVEX-encoded code`).
    pub what: &'static str,
    /// Why, for the message.
    pub why: &'static str,
}

/// Where the caller's return address lives at a call.
#[derive(Debug, Clone, Copy)]
pub enum ReturnAddress {
    /// In this register (`ra`, `x30`).
    Register(i32),
    /// Pushed on the stack by `call`: the stack pointer is 8 below the 16-byte aligned top.
    Stack,
}

/// One Unicorn interrupt number and the fault it is.
#[derive(Debug)]
pub struct UcInterrupt {
    /// Interrupt numbers with this meaning.
    pub intnos: &'static [u32],
    /// The fault.
    pub trap: Trap,
    /// Where the faulting instruction is.
    pub pc: TrapPc,
    /// Register holding the faulting data address, if the engine sets one (0: unknown).
    pub addr_register: Option<i32>,
}

/// The fault an interrupt number stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trap {
    /// Undefined instruction.
    IllegalInstruction,
    /// A system-call instruction.
    SystemCall,
    /// A breakpoint instruction.
    Breakpoint,
    /// A misaligned or otherwise refused data access.
    Misaligned,
    /// Divide error.
    Arithmetic,
}

/// Where the faulting instruction is, given Unicorn's pc after the interrupt.
#[derive(Debug, Clone, Copy)]
pub enum TrapPc {
    /// The pc itself.
    Pc,
    /// This many bytes before the pc (the engine stepped past the instruction).
    Before(u64),
    /// In this register (RISC-V `mepc`); when it reads 0, this many bytes before the pc.
    Register(i32, u64),
}

/// llvm-mca facts.
#[derive(Debug)]
pub struct McaSpec {
    /// `-mtriple`.
    pub triple: &'static str,
    /// Scheduling models predicted by default.
    pub models: &'static [&'static str],
    /// Models for code using an extension (row name) that the default models lack: a variant
    /// declaring the first listed extension is predicted on these instead (x86 AVX-512:
    /// `icelake-server`, `znver4`).
    pub by_extension: &'static [(&'static str, &'static [&'static str])],
    /// The vector register width in bits each vector model charges for (`-mcpu` name, bits):
    /// llvm-mca charges a vector instruction by LMUL for these registers whatever the vector
    /// length (`-mattr=+zvl256b` changes nothing), so a loop of L = VLEN / 16 lanes is read at
    /// the model's own width, and at [`McaSpec::vector_reading`] with the same charges.
    pub model_vlen: &'static [(&'static str, u32)],
    /// A vector length (bits) every vector model is also read at (riscv64: 256, the issue's
    /// RVV target), whatever its own width.
    pub vector_reading: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variant::VARIANTS;

    #[test]
    fn every_row_describes_its_own_arch() {
        for a in Arch::ALL {
            assert_eq!((a.spec().arch, a.spec().abi.arch), (a, a), "{a}");
        }
    }

    /// The variant table's `--mattr` and `-cpu` strings are what the ISA rows derive.
    #[test]
    fn variant_strings_follow_the_isa_rows() {
        for v in &VARIANTS {
            let isa = &v.arch.spec().isa;
            let on: Vec<&IsaExtension> = v.extensions.iter().filter_map(|n| isa.extension(n)).collect();
            assert_eq!(on.len(), v.extensions.len(), "{}: unknown extension in {:?}", v.name, v.extensions);
            assert_eq!(isa.mattr(&on), v.mattr, "{}", v.name);
            assert_eq!(isa.qemu_cpu(&on), v.qemu_cpu, "{}", v.name);
            assert_eq!(v.zbb, v.extensions.contains(&"zbb"), "{}: `zbb` and `extensions` disagree", v.name);
        }
    }

    #[test]
    fn riscv_isa_strings_render_as_before() {
        let isa = &Arch::Riscv64.spec().isa;
        assert!(isa.wide_mattr().starts_with("+m,+a,+f,+d,+c,+zba,+zbb,+zbc,+zbs,+zbkb"), "{}", isa.wide_mattr());
        let zbkb = isa.extension("ZBKB").unwrap();
        assert_eq!(isa.qemu_cpu(&[zbkb]), "rv64,zba=false,zbb=false,zbc=false,zbs=false,zbkb=true");
    }

    /// The vector-length rows: the lengths each allows, and the `-cpu` text of one.
    #[test]
    fn vector_lengths_are_checked_and_become_qemu_properties() {
        let rvv = Arch::Riscv64.spec().isa.vector_length.as_ref().unwrap();
        assert!(rvv.check(128).is_ok() && rvv.check(1024).is_ok());
        assert_eq!(rvv.check(384).unwrap_err(), "VLEN 384: must be a power of two in 128..=1024 bits");
        assert!(rvv.check(64).is_err() && rvv.check(2048).is_err());
        assert_eq!(rvv.at(256).qemu_properties(), "vlen=256");
        assert_eq!(rvv.at(256).to_string(), "vlen=256");
        let sve = Arch::Aarch64.spec().isa.vector_length.as_ref().unwrap();
        assert!(sve.check(384).is_ok() && sve.check(2048).is_ok());
        assert_eq!(sve.check(200).unwrap_err(), "SVE VL 200: must be a multiple of 128 in 128..=2048 bits");
        assert!(sve.check(2176).is_err() && sve.check(0).is_err());
        assert_eq!(sve.at(512).qemu_properties(), "sve-default-vector-length=64");
        assert_eq!(sve.at(512).to_string(), "sve-vl=512");
        assert!(Arch::X86_64.spec().isa.vector_length.is_none());
        let isa = &Arch::Riscv64.spec().isa;
        assert!(isa.vector_length_of(&["zbb", "v"]).is_some() && isa.vector_length_of(&["zbb"]).is_none());
    }

    #[test]
    fn x86_extensions_use_qemu_property_names() {
        let isa = &Arch::X86_64.spec().isa;
        let on: Vec<_> = ["lzcnt", "bmi2"].iter().filter_map(|n| isa.extension(n)).collect();
        assert_eq!(isa.qemu_cpu(&on), "qemu64,abm=true,bmi2=true");
        assert_eq!(isa.mattr(&on), "", "LLVM's x86 disassembler takes no features");
    }
}
