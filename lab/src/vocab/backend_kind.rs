//! The backends by name (what executes a batch); opening one, and whether it can run a
//! variant, is `crate::backend`'s business.

/// Which emulator or host runs the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// Unicorn 2.1.5 in-process (QEMU 5.0.1 core).
    Unicorn,
    /// qemu-user 7.2, one long-lived process per variant.
    Qemu,
    /// The x86_64 image executed directly on an x86_64 host.
    Native,
}

impl BackendKind {
    /// Every backend, in report order.
    pub const ALL: [BackendKind; 3] = [BackendKind::Unicorn, BackendKind::Qemu, BackendKind::Native];

    /// Command-line and report name.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Unicorn => "unicorn",
            BackendKind::Qemu => "qemu",
            BackendKind::Native => "native",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(name: &str) -> Option<BackendKind> {
        BackendKind::ALL.into_iter().find(|b| b.name() == name)
    }

    /// How finely this backend checks buffer bounds, for reports: `bytes` (Unicorn checks every
    /// byte on the first and last page of each buffer) or `pages` (qemu and native see an access
    /// outside a buffer only once it reaches a guard page).
    pub fn bounds(self) -> &'static str {
        match self {
            BackendKind::Unicorn => "bytes",
            BackendKind::Qemu | BackendKind::Native => "pages",
        }
    }
}

named_values!(BackendKind);
