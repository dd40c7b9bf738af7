//! The host's confinement primitives, shared by guest processes (`crate::backend::confine`:
//! qemu-user and native guests) and builds (`crate::build_confine`: clang and ld.lld): what the
//! running kernel offers, the Landlock ruleset both start from (so both deny the same rights by
//! default), a program's ELF interpreter (which must stay executable), and killing a child's
//! whole process group.

use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreated, Scope, ABI,
};

/// Landlock ABI the rules are written for (6 adds signal and abstract-socket scoping).
pub const LANDLOCK_ABI: ABI = ABI::V6;

/// What the running kernel offers for confinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// seccomp filter mode (`CONFIG_SECCOMP_FILTER`).
    pub seccomp: bool,
    /// Landlock ABI version, 0 when Landlock is missing or disabled.
    pub landlock_abi: i32,
}

impl Support {
    /// Asks the kernel (`prctl(PR_GET_SECCOMP)`, `landlock_create_ruleset(.., VERSION)`).
    pub fn probe() -> Support {
        // SAFETY: PR_GET_SECCOMP reads the calling thread's mode; no memory is passed.
        let seccomp = unsafe { libc::prctl(libc::PR_GET_SECCOMP) } >= 0 && seccomp_filter_mode_available();
        // SAFETY: LANDLOCK_CREATE_RULESET_VERSION (1) with a null attribute returns the ABI.
        let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
        Support { seccomp, landlock_abi: i32::try_from(abi.max(0)).unwrap_or(0) }
    }

    /// One line per missing layer, empty when the guest is fully confined.
    pub fn gaps(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.seccomp {
            out.push(
                "the kernel has no seccomp filter mode (CONFIG_SECCOMP_FILTER): guest system calls are not filtered"
                    .into(),
            );
        }
        if self.landlock_abi == 0 {
            out.push(
                "the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK, lsm=landlock): guests may write files".into(),
            );
        } else if self.landlock_abi < 6 {
            out.push(format!(
                "Landlock ABI {} (< 6): guest signals and abstract sockets are not scoped; seccomp still refuses them",
                self.landlock_abi
            ));
        }
        if ptrace_disabled() {
            out.push(
                "ptrace is disabled (kernel.yama.ptrace_scope = 3): qemu-user guests run without the host's witness \
                 (a protection lift undone within a call or a fault swallowed by the kernel's own handler is not seen)"
                    .into(),
            );
        }
        out
    }
}

/// Whether Yama forbids every `ptrace` attach (`/proc/sys/kernel/yama/ptrace_scope` = 3): the
/// witness of qemu-user guests (backend/process/witness.rs) cannot trace them. Other refusals
/// (a container's seccomp profile) show when a guest starts, as a report warning.
fn ptrace_disabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").is_ok_and(|s| s.trim() == "3")
}

/// `seccomp(SECCOMP_GET_ACTION_AVAIL, SECCOMP_RET_TRAP)`: filter mode with the trap action.
fn seccomp_filter_mode_available() -> bool {
    let action: u32 = 0x0003_0000; // SECCOMP_RET_TRAP
                                   // SAFETY: the kernel reads one u32 from `action`.
    unsafe { libc::syscall(libc::SYS_seccomp, 2u32, 0u32, &action as *const u32) == 0 }
}

/// A Landlock ruleset that handles every filesystem right of [`LANDLOCK_ABI`], TCP bind and
/// connect, and signal and abstract-socket scoping, with no rule yet: what guests and builds
/// ([`crate::build_confine`]) start from, so both deny the same rights by default.
///
/// # Errors
/// Landlock's own, when the ruleset cannot be created.
pub fn empty_ruleset() -> Result<RulesetCreated, landlock::RulesetError> {
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(LANDLOCK_ABI))?
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)?
        .create()
}

/// The `PT_INTERP` of a dynamically linked program (the kernel opens it for execution too).
/// Reads only the file's first 64 KiB, where the ELF header, program headers and the
/// interpreter's path live (the whole of qemu-aarch64 is 4.7 MB, read again at every restart).
pub fn interpreter_of(program: &Path) -> Option<PathBuf> {
    use object::read::elf::{FileHeader as _, ProgramHeader as _};
    use std::io::Read as _;
    let mut data = Vec::with_capacity(64 << 10);
    std::fs::File::open(program).ok()?.take(64 << 10).read_to_end(&mut data).ok()?;
    let header = object::elf::FileHeader64::<object::Endianness>::parse(&*data).ok()?;
    let endian = header.endian().ok()?;
    let headers = header.program_headers(endian, &*data).ok()?;
    let interp = headers.iter().find_map(|ph| ph.interpreter(endian, &*data).ok().flatten())?;
    Some(PathBuf::from(std::str::from_utf8(interp).ok()?.trim_end_matches('\0')))
}

/// The first steps of every child the lab confines (guests and build tools), run in the forked
/// child before `execve`: its own process group (one `kill(-pgid)` ends it and whatever it
/// started) and `SIGKILL` when the lab dies (`PR_SET_PDEATHSIG`); a child whose lab died before
/// that call exits at once. rustix makes raw system calls (no allocation, no locks): safe after
/// fork.
///
/// # Errors
/// `setpgid` or `prctl` failing.
pub fn enter_own_group(parent: u32) -> std::io::Result<()> {
    use rustix::process as p;
    p::setpgid(None, None)?;
    p::set_parent_process_death_signal(Some(p::Signal::KILL))?;
    // The lab may have died between fork and prctl: then nobody would send the signal.
    if p::getppid().map(|pid| pid.as_raw_nonzero().get()) != i32::try_from(parent).ok() {
        // SAFETY: _exit ends the forked child at once, running nothing of the parent's state.
        unsafe { libc::_exit(1) };
    }
    Ok(())
}

/// Kills a guest's whole process group and the guest itself (`SIGKILL`).
pub fn kill_group(pid: u32) {
    use rustix::process::{kill_process, kill_process_group, Pid, Signal};
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return };
    // Either may find nothing left to kill: that is the goal, not an error.
    let _ = kill_process_group(pid, Signal::KILL);
    let _ = kill_process(pid, Signal::KILL);
}
