//! An external program by name, with the Debian package that brings it (every "missing tool"
//! message names the package).

/// An external program and the Debian package that brings it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    /// Program name looked up on `PATH`.
    pub program: &'static str,
    /// Debian 12 package that installs it.
    pub package: &'static str,
}
