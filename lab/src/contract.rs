//! Kernel contracts as a table: one row per entry point a kernel image may define, saying
//! what each argument is (C type, width, how the psABI passes it, what memory it points to
//! and whether the kernel may write it), which reference function is the oracle, and which
//! planner turns a vector into calls. docs/contracts.md prints the same table in words.
//!
//! Two families live here: HotSpot's intrinsic stubs (the JDK's `StubRoutines`) and
//! OpenSSL's block functions (`crypto/md5/md5_local.h`, `crypto/poly1305/poly1305.c`). An
//! image runs an algorithm through one family: the first family in [`Family::ALL`] whose
//! every symbol for that algorithm the image defines ([`family_of`]). A further contract with
//! the call shape of an existing row (e.g. BoringSSL's `md5_block_asm_data_order(uint32_t
//! *state, const uint8_t *in, size_t num)`, the OpenSSL shape with a 16-byte context) is a
//! new row; one with a new shape needs a planner ([`Shape`]) and a reference function.

use std::fmt;

use crate::variant::{Kernel, MD5_IMPL_COMPRESS, MD5_IMPL_COMPRESS_MB, POLY1305_PROCESS_BLOCKS};

/// Who defined a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// HotSpot intrinsic stubs (`md5_implCompress`, `md5_implCompressMB`,
    /// `poly1305_processBlocks`), OpenJDK `src/hotspot/share/runtime/stubRoutines.hpp`.
    HotSpot,
    /// OpenSSL block functions (`md5_block_data_order`, `poly1305_blocks`).
    OpenSsl,
    /// BoringSSL's MD5 block function (`md5_block_asm_data_order` on a bare `uint32_t[4]`
    /// state), BoringSSL `crypto/md5/internal.h`. It has no Poly1305 row: BoringSSL's Poly1305
    /// has no assembly block function of its own contract.
    BoringSsl,
}

impl Family {
    /// Every family, in precedence order: an image defining two runs the first's.
    pub const ALL: [Family; 3] = [Family::HotSpot, Family::OpenSsl, Family::BoringSsl];

    /// Report and command-line name (`hotspot`, `openssl`).
    pub fn name(self) -> &'static str {
        match self {
            Family::HotSpot => "hotspot",
            Family::OpenSsl => "openssl",
            Family::BoringSsl => "boringssl",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a scalar argument travels in its 64-bit argument register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passing {
    /// A pointer: the full register.
    Pointer,
    /// A 32-bit `int` / `unsigned int`: upper half unspecified on x86_64 and aarch64 (the lab
    /// fills it with garbage), sign-extended on riscv64 ([`crate::abi::Int32Args`]).
    Int32,
    /// A 64-bit `size_t`: the full register, no garbage (the lab passes clean values).
    SizeT,
    /// A signed 64-bit integer (`int64_t`): the full register.
    Int64,
    /// Not read by the contract (HotSpot's `implCompress` has two arguments; the lab puts
    /// random values in the unused registers).
    Unused,
}

/// What an argument's memory is to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only; the lab maps it read-only during the call.
    ReadOnly,
    /// Read and written (state, accumulator, context); parts the call must not change are
    /// named in [`Param::memory`] and checked bit for bit.
    ReadWrite,
}

/// One parameter of a contract.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// The C parameter name (`buf`, `num`, `padbit`).
    pub name: &'static str,
    /// The C type as the contract's source declares it.
    pub c_type: &'static str,
    /// Width of the value in bits (64 for pointers and `size_t`).
    pub bits: u32,
    /// How the register carries it.
    pub passing: Passing,
    /// For pointers: what the memory holds, in words, and how the kernel may access it.
    pub memory: Option<(&'static str, Access)>,
}

/// Which planner lays a vector's calls for a contract: the call shapes the lab knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// MD5, one block, state words (HotSpot `implCompress`).
    Md5One,
    /// MD5, blocks counted by `int` offsets `ofs..=limit` (HotSpot `implCompressMB`).
    Md5OfsLimit,
    /// MD5, `num` blocks, state words at the start of a context (OpenSSL).
    Md5Num,
    /// MD5, `num` blocks, a bare 16-byte state `uint32_t[4]` (BoringSSL).
    Md5NumState16,
    /// Poly1305, `int length` bytes, 26-bit limbs, the 2^128 bit always set (HotSpot).
    Poly1305Limbs26,
    /// Poly1305, `size_t len` bytes, base 2^64 context, `padbit` (OpenSSL scalar).
    Poly1305Base64,
    /// OpenSSL's `poly1305_init(ctx, key, func)`: lays out the opaque context and, when it
    /// returns non-zero, stores the `blocks` and `emit` entry points of the path it chose.
    Poly1305Init,
    /// OpenSSL's `poly1305_emit(ctx, mac, nonce)`: the tag from the opaque context.
    Poly1305Emit,
}

/// One contract: a symbol a kernel image defines, and everything the lab needs to call it.
#[derive(Debug, Clone, Copy)]
pub struct Contract {
    /// The symbol (the C function name).
    pub symbol: &'static str,
    /// Who defined it.
    pub family: Family,
    /// The algorithm it computes.
    pub kernel: Kernel,
    /// Parameters in argument-register order (at most four: the driver passes four).
    pub params: &'static [Param],
    /// The C return type.
    pub returns: &'static str,
    /// The planner's call shape.
    pub shape: Shape,
    /// The reference function the lab compares with (a path in this crate).
    pub reference: &'static str,
    /// Where the contract is defined.
    pub source: &'static str,
}

const fn ptr(name: &'static str, c_type: &'static str, what: &'static str, access: Access) -> Param {
    Param { name, c_type, bits: 64, passing: Passing::Pointer, memory: Some((what, access)) }
}

const fn int(name: &'static str, c_type: &'static str) -> Param {
    Param { name, c_type, bits: 32, passing: Passing::Int32, memory: None }
}

const fn size_t(name: &'static str) -> Param {
    Param { name, c_type: "size_t", bits: 64, passing: Passing::SizeT, memory: None }
}

/// `md5_block_data_order`, OpenSSL's MD5 block function.
pub const MD5_BLOCK_DATA_ORDER: &str = "md5_block_data_order";
/// `poly1305_blocks`, OpenSSL's scalar Poly1305 block function.
pub const POLY1305_BLOCKS: &str = "poly1305_blocks";
/// `poly1305_init`, OpenSSL's Poly1305 set-up: chooses the code path (returns the `blocks` and
/// `emit` pointers through `func`) and lays out the opaque context.
pub const POLY1305_INIT: &str = "poly1305_init";
/// `poly1305_emit`, OpenSSL's Poly1305 finalisation: the tag from the opaque context.
pub const POLY1305_EMIT: &str = "poly1305_emit";
/// Bytes of the opaque Poly1305 context the lab gives `poly1305_init` and every later call:
/// `double opaque[24]` of OpenSSL's `struct poly1305_context` (include/crypto/poly1305.h),
/// which holds the vector paths' base 2^26 state and power tables (x86_64 AVX-512: h at 0,
/// r^1..r^4 from 48 up to 48 + 9·16; armv8 NEON: powers from 48 up to 48 + 4·36).
pub const POLY1305_OPAQUE_BYTES: usize = 192;

/// `md5_block_asm_data_order`, BoringSSL's MD5 block function (16-byte state).
pub const MD5_BLOCK_ASM_DATA_ORDER: &str = "md5_block_asm_data_order";

/// One name a library exports for a contract's function, found in a user's objects without
/// `--symbol` ([`exported_name`]).
#[derive(Debug, Clone, Copy)]
pub struct ExportedName {
    /// The symbol the library's objects define.
    pub export: &'static str,
    /// The contract symbol it implements.
    pub contract: &'static str,
    /// Where the name comes from.
    pub source: &'static str,
    /// What the name says about the code's ISA, appended to the arch's base ISA string when
    /// no ISA is declared (`"_zbb"`: OpenSSL names its Zbb build so, and its build assembles it
    /// with the toolchain's default `-march`, the Zbb instructions hand-encoded as `.word`, so
    /// the object's own attributes do not say Zbb); empty when it says nothing.
    pub implies: &'static str,
}

/// Names libraries export for contract functions, in the order they are tried. OpenSSL 3.0 and
/// later rename `md5_block_data_order` (crypto/md5/md5_local.h `#define md5_block_data_order
/// ossl_md5_block_asm_data_order`); its riscv64 perlasm (crypto/md5/asm/md5-riscv64-zbb.pl,
/// generated twice by crypto/md5/build.info) appends `_riscv64` or `_zbb`, and
/// crypto/md5/md5_riscv.c picks one at run time.
pub const EXPORTED_NAMES: [ExportedName; 3] = [
    ExportedName {
        export: "ossl_md5_block_asm_data_order",
        contract: MD5_BLOCK_DATA_ORDER,
        source: "OpenSSL 3.x/4.x crypto/md5/asm/md5-{x86_64,aarch64}.pl",
        implies: "",
    },
    ExportedName {
        export: "ossl_md5_block_asm_data_order_zbb",
        contract: MD5_BLOCK_DATA_ORDER,
        source: "OpenSSL 3.x/4.x crypto/md5/asm/md5-riscv64-zbb.pl (zbb build)",
        implies: "_zbb",
    },
    ExportedName {
        export: "ossl_md5_block_asm_data_order_riscv64",
        contract: MD5_BLOCK_DATA_ORDER,
        source: "OpenSSL 3.x/4.x crypto/md5/asm/md5-riscv64-zbb.pl (RV64GC build)",
        implies: "",
    },
];

/// The symbol of objects defining `defined` that implements `contract` under a library's
/// exported name ([`EXPORTED_NAMES`], first match), when the objects do not define the contract
/// name itself.
pub fn exported_name(contract: &str, defined: impl Fn(&str) -> bool) -> Option<&'static str> {
    if defined(contract) {
        return None;
    }
    EXPORTED_NAMES.iter().find(|e| e.contract == contract && defined(e.export)).map(|e| e.export)
}

/// The ISA string objects defining `defined` declare when no ISA is given: `base` plus what
/// the exported names they are run under imply ([`ExportedName::implies`]; contracts in
/// `mapped` are named by the user and imply nothing).
pub fn implied_isa(base: &str, defined: impl Fn(&str) -> bool, mapped: impl Fn(&str) -> bool) -> String {
    let mut isa = base.to_owned();
    for c in CONTRACTS.iter().filter(|c| !mapped(c.symbol)) {
        let found = exported_name(c.symbol, &defined).and_then(|n| EXPORTED_NAMES.iter().find(|e| e.export == n));
        if let Some(e) = found.filter(|e| !isa.contains(e.implies)) {
            isa.push_str(e.implies);
        }
    }
    isa
}

/// A library function the lab knows is not a block function of any contract, found in a
/// user's objects ([`not_a_contract`]).
#[derive(Debug, Clone, Copy)]
pub struct NotAContract {
    /// The algorithm a user would try it as.
    pub kernel: Kernel,
    /// The start of the symbols' names.
    pub prefix: &'static str,
    /// What they are and what the library has instead.
    pub why: &'static str,
}

/// Library functions that look like a kernel but are not one the lab can call as a contract.
/// BoringSSL's Poly1305 has assembly only for 32-bit ARM (crypto/poly1305/poly1305_arm_asm.S,
/// NEON, an architecture the lab does not run); on x86_64 it is C with SSE2 intrinsics
/// (poly1305_vec.cc) and on aarch64 plain C. Its x86_64 and armv8 assembly that computes
/// Poly1305 is the fused AEAD (crypto/cipher/asm/chacha20_poly1305_{x86_64,armv8}.pl).
pub const NOT_CONTRACTS: [NotAContract; 1] = [NotAContract {
    kernel: Kernel::Poly1305,
    prefix: "chacha20_poly1305_",
    why: "BoringSSL's fused ChaCha20-Poly1305 AEAD (chacha20_poly1305_{seal,open}_*, \
          crypto/cipher/asm/chacha20_poly1305_{x86_64,armv8}.pl) is not a Poly1305 block function: \
          BoringSSL's own Poly1305 is C on x86_64 (poly1305_vec.cc) and aarch64, with assembly \
          only for 32-bit ARM (poly1305_arm_asm.S), which the lab does not run",
}];

/// What the lab knows about a symbol `defined` names for `kernel` that is not a contract's.
pub fn not_a_contract(kernel: Kernel, mut defined: impl Iterator<Item = impl AsRef<str>>) -> Option<&'static str> {
    let hit = |n: &str| NOT_CONTRACTS.iter().find(|c| c.kernel == kernel && n.starts_with(c.prefix));
    defined.find_map(|n| hit(n.as_ref())).map(|c| c.why)
}

/// Every contract, HotSpot's first. Order within a family is the order of
/// [`crate::variant::Kernel::symbols`].
pub const CONTRACTS: [Contract; 8] = [
    Contract {
        symbol: MD5_IMPL_COMPRESS,
        family: Family::HotSpot,
        kernel: Kernel::Md5,
        params: &[
            ptr("buf", "const uint8_t *", "one 64-byte block", Access::ReadOnly),
            ptr("state", "uint32_t[4]", "MD5 state words A..D", Access::ReadWrite),
            Param { name: "-", c_type: "-", bits: 64, passing: Passing::Unused, memory: None },
            Param { name: "-", c_type: "-", bits: 64, passing: Passing::Unused, memory: None },
        ],
        returns: "void",
        shape: Shape::Md5One,
        reference: "reference::md5::compress",
        source: "OpenJDK sun.security.provider.MD5.implCompress0 (HotSpot intrinsic _md5_implCompress)",
    },
    Contract {
        symbol: MD5_IMPL_COMPRESS_MB,
        family: Family::HotSpot,
        kernel: Kernel::Md5,
        params: &[
            ptr("buf", "const uint8_t *", "the blocks from ofs to limit", Access::ReadOnly),
            ptr("state", "uint32_t[4]", "MD5 state words A..D", Access::ReadWrite),
            int("ofs", "int"),
            int("limit", "int"),
        ],
        returns: "int (ofs after the last block)",
        shape: Shape::Md5OfsLimit,
        reference: "reference::md5::compress_mb",
        source: "OpenJDK sun.security.provider.DigestBase.implCompressMultiBlock0 (HotSpot _md5_implCompressMB)",
    },
    Contract {
        symbol: POLY1305_PROCESS_BLOCKS,
        family: Family::HotSpot,
        kernel: Kernel::Poly1305,
        params: &[
            ptr("input", "const uint8_t *", "length bytes (whole 16-byte blocks used)", Access::ReadOnly),
            Param { name: "length", c_type: "int64_t", bits: 64, passing: Passing::Int64, memory: None },
            ptr("acc", "int64_t[5]", "accumulator, 26-bit limbs", Access::ReadWrite),
            ptr("r", "const int64_t[5]", "clamped r, 26-bit limbs", Access::ReadOnly),
        ],
        returns: "void",
        shape: Shape::Poly1305Limbs26,
        reference: "reference::poly1305::process_blocks",
        source: "OpenJDK com.sun.crypto.provider.Poly1305.processMultipleBlocks (HotSpot _poly1305_processBlocks)",
    },
    Contract {
        symbol: MD5_BLOCK_DATA_ORDER,
        family: Family::OpenSsl,
        kernel: Kernel::Md5,
        params: &[
            ptr(
                "c",
                "MD5_CTX *",
                "MD5_CTX: A..D (words 0-3) read and written; Nl, Nh, data[16], num (bytes 16-91) untouched",
                Access::ReadWrite,
            ),
            ptr("p", "const void *", "num 64-byte blocks", Access::ReadOnly),
            size_t("num"),
            Param { name: "-", c_type: "-", bits: 64, passing: Passing::Unused, memory: None },
        ],
        returns: "void",
        shape: Shape::Md5Num,
        reference: "reference::md5::compress (num times)",
        source: "OpenSSL crypto/md5/md5_local.h, include/openssl/md5.h (MD5_CTX)",
    },
    Contract {
        symbol: POLY1305_BLOCKS,
        family: Family::OpenSsl,
        kernel: Kernel::Poly1305,
        params: &[
            ptr(
                "ctx",
                "void *",
                "scalar base 2^64 context: h[3] read and written; r (and per arch s1, flags) untouched",
                Access::ReadWrite,
            ),
            ptr("inp", "const unsigned char *", "len bytes (whole 16-byte blocks used)", Access::ReadOnly),
            size_t("len"),
            int("padbit", "unsigned int"),
        ],
        returns: "void",
        shape: Shape::Poly1305Base64,
        reference: "reference::openssl::poly1305_blocks",
        source: "OpenSSL crypto/poly1305/poly1305.c; asm/poly1305-{x86_64,armv8,riscv64}.pl context layouts",
    },
    Contract {
        symbol: POLY1305_INIT,
        family: Family::OpenSsl,
        kernel: Kernel::Poly1305,
        params: &[
            ptr("ctx", "void *", "opaque context, 192 bytes (double opaque[24]), laid out by init", Access::ReadWrite),
            ptr("key", "const unsigned char[16]", "r (the first 16 bytes of the one-time key)", Access::ReadOnly),
            ptr(
                "func",
                "void *",
                "two code pointers, blocks and emit, written when it returns non-zero",
                Access::ReadWrite,
            ),
            Param { name: "-", c_type: "-", bits: 64, passing: Passing::Unused, memory: None },
        ],
        returns: "int (non-zero: func holds the path's blocks and emit)",
        shape: Shape::Poly1305Init,
        reference: "reference::openssl::PolyCtx::init (scalar words)",
        source: "OpenSSL crypto/poly1305/poly1305.c (Poly1305_Init), include/crypto/poly1305.h (opaque[24])",
    },
    Contract {
        symbol: POLY1305_EMIT,
        family: Family::OpenSsl,
        kernel: Kernel::Poly1305,
        params: &[
            ptr("ctx", "void *", "opaque context (h read)", Access::ReadWrite),
            ptr("mac", "unsigned char[16]", "the tag", Access::ReadWrite),
            ptr("nonce", "const unsigned int[4]", "s, the last 16 bytes of the one-time key", Access::ReadOnly),
            Param { name: "-", c_type: "-", bits: 64, passing: Passing::Unused, memory: None },
        ],
        returns: "void",
        shape: Shape::Poly1305Emit,
        reference: "reference::poly1305::tag",
        source: "OpenSSL crypto/poly1305/poly1305.c (Poly1305_Final)",
    },
    Contract {
        symbol: MD5_BLOCK_ASM_DATA_ORDER,
        family: Family::BoringSsl,
        kernel: Kernel::Md5,
        params: &[
            ptr("state", "uint32_t *", "uint32_t[4]: A..D, 16 bytes, nothing after them", Access::ReadWrite),
            ptr("data", "const uint8_t *", "num 64-byte blocks", Access::ReadOnly),
            size_t("num"),
            Param { name: "-", c_type: "-", bits: 64, passing: Passing::Unused, memory: None },
        ],
        returns: "void",
        shape: Shape::Md5NumState16,
        reference: "reference::md5::compress (num times)",
        source: "BoringSSL crypto/md5/internal.h (md5_block_asm_data_order, x86 and x86_64 assembly)",
    },
];

impl Contract {
    /// Whether an image must define this symbol to run its algorithm through the family.
    /// `poly1305_init` and `poly1305_emit` are not required: an image that defines them (both)
    /// is run as OpenSSL's C code runs it, through `init`'s pointers; one that defines only
    /// `poly1305_blocks` gets the scalar base 2^64 context laid out by the lab (docs/contracts.md).
    pub fn required(&self) -> bool {
        !matches!(self.shape, Shape::Poly1305Init | Shape::Poly1305Emit)
    }
}

/// The contracts of `family` for `kernel`, in table order.
pub fn contracts(family: Family, kernel: Kernel) -> impl Iterator<Item = &'static Contract> {
    CONTRACTS.iter().filter(move |c| c.family == family && c.kernel == kernel)
}

/// Every contract symbol of `kernel`, all families (what `--symbol CONTRACT=SYM` and a
/// manifest may name), in table order.
pub fn symbols(kernel: Kernel) -> impl Iterator<Item = &'static str> {
    CONTRACTS.iter().filter(move |c| c.kernel == kernel).map(|c| c.symbol)
}

/// What reports add to a row or target of `kernel` run through `family` when that is not
/// HotSpot's: `openssl contract: md5_block_data_order`; `None` for HotSpot (its reports stay
/// as they were).
pub fn report_note(family: Family, kernel: Kernel) -> Option<String> {
    (family != Family::HotSpot).then(|| {
        let symbols: Vec<&str> = contracts(family, kernel).filter(|c| c.required()).map(|c| c.symbol).collect();
        format!("{family} contract: {}", symbols.join(", "))
    })
}

/// The contract named `symbol`.
pub fn by_symbol(symbol: &str) -> Option<&'static Contract> {
    CONTRACTS.iter().find(|c| c.symbol == symbol)
}

/// The family an image runs `kernel` through: the first in [`Family::ALL`] that has contracts
/// for `kernel` all of whose symbols `defined` says are there.
pub fn family_of(kernel: Kernel, defined: impl Fn(&str) -> bool) -> Option<Family> {
    Family::ALL.into_iter().find(|&f| {
        contracts(f, kernel).next().is_some()
            && contracts(f, kernel).filter(|c| c.required()).all(|c| defined(c.symbol))
    })
}

/// The family whose symbols a report names as missing when none is complete: the first other
/// than HotSpot's of which the image defines any symbol (a user porting OpenSSL code), when it
/// defines none of HotSpot's; HotSpot's otherwise.
pub fn intended_family(kernel: Kernel, defined: impl Fn(&str) -> bool) -> Family {
    let any = |f| contracts(f, kernel).filter(|c| c.required()).any(|c| defined(c.symbol));
    if any(Family::HotSpot) {
        return Family::HotSpot;
    }
    Family::ALL.into_iter().find(|&f| any(f)).unwrap_or(Family::HotSpot)
}

/// The contract table as Markdown, one row per contract (docs/contracts.md holds a copy
/// between `<!-- contracts:begin -->` and `<!-- contracts:end -->`, kept equal by a test).
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| symbol | family | kernel | arguments (C type, bits, passing; memory and access) | returns | reference |\n\
         |---|---|---|---|---|---|\n",
    );
    for c in &CONTRACTS {
        let args: Vec<String> = c.params.iter().filter(|p| p.passing != Passing::Unused).map(param_cell).collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | `{}` |\n",
            c.symbol,
            c.family,
            c.kernel,
            args.join("<br>"),
            c.returns,
            c.reference
        ));
    }
    out.push_str(
        "\nNames libraries export for a contract function, found in `--object` and manifest objects \
         without `--symbol` (when the objects do not define the contract name itself):\n\n\
         | exported name | contract | source |\n|---|---|---|\n",
    );
    for e in &EXPORTED_NAMES {
        out.push_str(&format!("| `{}` | `{}` | {} |\n", e.export, e.contract, e.source));
    }
    out
}

fn param_cell(p: &Param) -> String {
    let passing = match p.passing {
        Passing::Pointer => "pointer",
        Passing::Int32 => "32-bit: upper half garbage (x86_64, aarch64), sign-extended (riscv64)",
        Passing::SizeT => "64-bit, clean",
        Passing::Int64 => "64-bit, signed",
        Passing::Unused => "unused",
    };
    let memory = p.memory.map_or(String::new(), |(what, access)| {
        let a = match access {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        };
        format!(" -> {what} ({a})")
    });
    format!("`{} {}` ({} bits, {passing}){memory}", p.c_type, p.name, p.bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boringssl_fused_aead_is_named_as_not_a_poly1305_block_function() {
        let why = not_a_contract(Kernel::Poly1305, ["x", "chacha20_poly1305_seal_avx2"].iter()).expect("known");
        assert!(why.contains("poly1305_arm_asm.S") && why.contains("poly1305_vec.cc"), "{why}");
        assert!(not_a_contract(Kernel::Md5, ["chacha20_poly1305_seal_avx2"].iter()).is_none());
        assert!(not_a_contract(Kernel::Poly1305, ["poly1305_blocks"].iter()).is_none());
    }

    #[test]
    fn docs_contracts_md_holds_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/contracts.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (head, rest) = doc.split_once("<!-- contracts:begin -->\n").expect("begin marker");
        let (inside, tail) = rest.split_once("<!-- contracts:end -->").expect("end marker");
        if std::env::var_os("KERNEL_LAB_BLESS").is_some() {
            let blessed = format!("{head}<!-- contracts:begin -->\n{}<!-- contracts:end -->{tail}", markdown_table());
            std::fs::write(path, blessed).unwrap();
            return;
        }
        assert_eq!(
            inside,
            markdown_table(),
            "docs/contracts.md is stale: KERNEL_LAB_BLESS=1 cargo test --lib contract"
        );
    }

    #[test]
    fn every_row_has_at_most_four_params_and_pointers_name_their_memory() {
        for c in &CONTRACTS {
            assert!(c.params.len() <= 4, "{}", c.symbol);
            for p in c.params {
                assert_eq!(p.passing == Passing::Pointer, p.memory.is_some(), "{}: {}", c.symbol, p.name);
            }
        }
    }

    #[test]
    fn hotspot_rows_match_the_kernel_symbols() {
        for k in Kernel::ALL {
            let names: Vec<&str> = contracts(Family::HotSpot, k).map(|c| c.symbol).collect();
            assert_eq!(names, k.symbols(), "{k}");
        }
    }

    #[test]
    fn hotspot_wins_when_both_are_defined_and_openssl_alone_selects_openssl() {
        assert_eq!(family_of(Kernel::Md5, |_| true), Some(Family::HotSpot));
        let openssl_only = |s: &str| s == MD5_BLOCK_DATA_ORDER || s == POLY1305_BLOCKS;
        assert_eq!(family_of(Kernel::Md5, openssl_only), Some(Family::OpenSsl));
        assert_eq!(family_of(Kernel::Poly1305, openssl_only), Some(Family::OpenSsl));
        assert_eq!(family_of(Kernel::Md5, |s| s == MD5_IMPL_COMPRESS), None);
        assert_eq!(intended_family(Kernel::Md5, |s| s == MD5_IMPL_COMPRESS), Family::HotSpot);
        assert_eq!(intended_family(Kernel::Poly1305, |_| false), Family::HotSpot);
    }

    #[test]
    fn boringssl_md5_is_its_own_row_and_has_no_poly1305() {
        let boring = |s: &str| s == MD5_BLOCK_ASM_DATA_ORDER;
        assert_eq!(family_of(Kernel::Md5, boring), Some(Family::BoringSsl));
        assert_eq!(family_of(Kernel::Poly1305, boring), None, "an empty family is never complete");
        assert_eq!(family_of(Kernel::Poly1305, |_| false), None);
        let row = by_symbol(MD5_BLOCK_ASM_DATA_ORDER).unwrap();
        assert_eq!(row.shape, Shape::Md5NumState16);
        let openssl_too = |s: &str| s == MD5_BLOCK_ASM_DATA_ORDER || s == MD5_BLOCK_DATA_ORDER;
        assert_eq!(family_of(Kernel::Md5, openssl_too), Some(Family::OpenSsl));
    }

    #[test]
    fn exported_names_map_onto_the_openssl_row_only_without_the_contract_name() {
        let ossl = |s: &str| s == "ossl_md5_block_asm_data_order";
        assert_eq!(exported_name(MD5_BLOCK_DATA_ORDER, ossl), Some("ossl_md5_block_asm_data_order"));
        let zbb = |s: &str| s.starts_with("ossl_md5_block_asm_data_order_");
        assert_eq!(exported_name(MD5_BLOCK_DATA_ORDER, zbb), Some("ossl_md5_block_asm_data_order_zbb"));
        let both = |s: &str| s == MD5_BLOCK_DATA_ORDER || s == "ossl_md5_block_asm_data_order";
        assert_eq!(exported_name(MD5_BLOCK_DATA_ORDER, both), None, "its own name wins");
        assert_eq!(exported_name(POLY1305_BLOCKS, ossl), None);
        for e in &EXPORTED_NAMES {
            assert!(by_symbol(e.contract).is_some(), "{}", e.export);
        }
    }

    #[test]
    fn openssl_s_zbb_name_implies_zbb_unless_the_user_names_the_symbol() {
        let zbb = |s: &str| s == "ossl_md5_block_asm_data_order_zbb";
        let rv64 = |s: &str| s == "ossl_md5_block_asm_data_order_riscv64";
        assert_eq!(implied_isa("rv64gc", zbb, |_| false), "rv64gc_zbb");
        assert_eq!(implied_isa("rv64gc", rv64, |_| false), "rv64gc");
        assert_eq!(implied_isa("rv64gc", zbb, |c| c == MD5_BLOCK_DATA_ORDER), "rv64gc", "--symbol maps it");
        let both = |s: &str| zbb(s) || rv64(s);
        assert_eq!(implied_isa("rv64gc", both, |_| false), "rv64gc_zbb", "the _zbb name is tried first");
    }
}
