//! Confinement of guest processes (qemu-user and native): what a kernel under test may do to
//! the host. The kernel is untrusted code; it must reach neither the machine nor the verdict.
//!
//! Every guest child, before `execve` ([`Command::pre_exec`]):
//! - leaves the lab's process group (`setpgid(0, 0)`), so the lab can kill the guest and
//!   anything it started with one `kill(-pgid)`, and asks for `SIGKILL` when the lab dies
//!   (`PR_SET_PDEATHSIG`): no guest outlives the lab;
//! - restricts itself with Landlock (crate `landlock`): no file-system writes anywhere, execute
//!   only the program being started (and its ELF interpreter), reads only what qemu-user needs,
//!   no TCP, no signals and no abstract UNIX sockets outside its own domain (Landlock ABI 6);
//! - installs a seccomp filter (crate `seccompiler`, [`refusal_filter`]) that traps a second
//!   `execve`, `fork`/`vfork`/`clone` without `CLONE_THREAD`, signals to other processes,
//!   sockets, `ptrace`, opens for writing, `setsid`/`setpgid` and clearing the death signal.
//!   A trapped call raises SIGSYS; the guest's fault handler reports it like any fault, so it
//!   becomes a finding naming the call (see `FaultKind::SystemCall`).
//!
//! Native guests get two more layers: the x86_64 driver's `_start` installs the allow-list of
//! [`native_allow_list`] (read the request fd, write the reply fd, `mprotect` inside
//! `lab_arena` and the kernels' data, `rt_sigreturn`, `exit_group`, what forking a batch child
//! takes) after its own set-up; then for every batch it lays the protections and forks a batch
//! child that installs [`batch_filter`] (write the reply fd, `exit_group`) before the first
//! kernel call, so kernel code can change no protection, handler or mapping. Both programs come
//! from the lab on fd [`SECCOMP_FD`]. qemu-user cannot take such filters: it makes system calls
//! of its own on the guest's behalf (`mprotect` for its code cache among them), so there the
//! refusal filter above is the limit and the host's checks after the batch see the rest.
//!
//! Unicorn runs the image in-process and never executes a guest system call (it is a hook).
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that spawned the guest ends: spawn guests from a
//! thread that outlives them (the `lab` commands spawn from the main thread).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use landlock::{AccessFs, PathBeneath, PathFd, RulesetCreated, RulesetCreatedAttr};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::sandbox::{empty_ruleset, interpreter_of, Support};

/// The file descriptor on which a native guest finds its seccomp allow-list (raw
/// `struct sock_filter` array, read to EOF by the x86_64 driver's `lab_seccomp_install`).
pub const SECCOMP_FD: i32 = crate::protocol::fd::SECCOMP as i32;

/// Stands for the guest's own pid in the compiled refusal filter; patched in the child, where
/// the pid is known, without allocating.
const PID_SENTINEL: u32 = 0x7e5e_1d5e;

/// Which kind of guest is being started.
pub enum Guest<'a> {
    /// `qemu-<arch>` running `image`.
    Qemu { qemu: &'a Path, image: &'a Path },
    /// `image` executed directly; `protectable` = the `[start, end)` ranges the driver may
    /// `mprotect`: `lab_arena` and the kernels' writable data (read-only during calls).
    Native { image: &'a Path, protectable: &'a [(u64, u64)] },
}

/// Sets `cmd` up to start a confined guest in its own process group. Layers the kernel lacks
/// are left out (see [`Support::gaps`]); a layer the kernel has but refuses is an error.
///
/// # Errors
/// A Landlock rule or seccomp filter that cannot be built (names the layer).
pub fn confine(cmd: &mut Command, guest: &Guest<'_>, support: Support) -> Result<(), String> {
    let ruleset = match support.landlock_abi {
        0 => None,
        _ => Some(landlock_ruleset(guest).map_err(|e| format!("Landlock: {e}"))?),
    };
    let mut refusal = None;
    let mut clone3 = None;
    let mut allow_fd = None;
    if support.seccomp {
        let exec_path = cmd.get_program().as_encoded_bytes().as_ptr() as u64;
        let native = matches!(guest, Guest::Native { .. });
        refusal = Some(refusal_filter(exec_path, native).map_err(|e| format!("seccomp: {e}"))?);
        clone3 = Some(clone3_filter().map_err(|e| format!("seccomp: {e}"))?);
        if let Guest::Native { protectable, .. } = guest {
            let allow = native_allow_list(protectable).map_err(|e| format!("seccomp: {e}"))?;
            let batch = batch_filter().map_err(|e| format!("seccomp: {e}"))?;
            allow_fd = Some(filter_pipe(&allow, &batch).map_err(|e| format!("seccomp filter pipe: {e}"))?);
        }
    }
    let parent = std::process::id();
    let mut ruleset = ruleset;
    // SAFETY: the closure runs in the forked child before exec. It only makes system calls and
    // patches a buffer it owns: no allocation, no locks (Landlock's restrict_self and
    // seccompiler's apply_filter are plain prctl/syscall wrappers on data built above).
    unsafe {
        cmd.pre_exec(move || in_child(parent, &mut ruleset, refusal.as_mut(), clone3.as_deref(), allow_fd.as_ref()));
    }
    Ok(())
}

/// Drops every capability (capabilities(7)): the bounding set first (no later `execve` of a
/// privileged file can regain one; needs CAP_SETPCAP, so a lab run by an ordinary user skips
/// it, having nothing to drop), the ambient set, then the effective, permitted and inheritable
/// sets. Runs in the forked child: plain system calls only.
fn drop_capabilities() -> std::io::Result<()> {
    use rustix::io::Errno;
    use rustix::thread::{self as t, CapabilitySet, CapabilitySets};
    for bit in 0..64 {
        let cap = CapabilitySet::from_bits_retain(1 << bit);
        match t::capability_is_in_bounding_set(cap) {
            Ok(true) => match t::remove_capability_from_bounding_set(cap) {
                Ok(()) | Err(Errno::PERM) => {}
                Err(e) => return Err(e.into()),
            },
            // EINVAL: a number past the kernel's last capability.
            Ok(false) | Err(Errno::INVAL) => {}
            Err(e) => return Err(e.into()),
        }
    }
    match t::clear_ambient_capability_set() {
        Ok(()) | Err(Errno::INVAL) => {} // EINVAL: a kernel before ambient capabilities (4.3)
        Err(e) => return Err(e.into()),
    }
    let none = CapabilitySet::empty();
    t::set_capabilities(None, CapabilitySets { effective: none, permitted: none, inheritable: none })?;
    Ok(())
}

/// The guest's resource limits (setrlimit(2)): [`GUEST_ADDRESS_SPACE`] of address space, 256
/// descriptors, no core files, 1 MiB per written file (it may write none: Landlock). No CPU
/// limit: one guest serves a whole campaign; each batch has its own wall-clock budget.
fn set_limits() -> std::io::Result<()> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    let set = |r, v: u64| setrlimit(r, Rlimit { current: Some(v), maximum: Some(v) });
    set(Resource::As, GUEST_ADDRESS_SPACE)?;
    set(Resource::Nofile, 256)?;
    set(Resource::Core, 0)?;
    set(Resource::Fsize, 1 << 20)?;
    Ok(())
}

/// Address space a guest may map, bytes: qemu-user's code cache and the guest's own maps fit in
/// it (qemu 7.2 starts in 512 MiB), a runaway allocation stops there.
pub const GUEST_ADDRESS_SPACE: u64 = 1 << 30;

/// Marks every descriptor above the protocol's close-on-exec (`close_range(2)`,
/// `CLOSE_RANGE_CLOEXEC`, Linux 5.11): what the lab inherited (a CI log, make's jobserver, a
/// shell's `7>>file`) never reaches the guest. Keeps 0-2, the protocol's 3-5 and, for a native
/// guest, the allow-list on [`SECCOMP_FD`]. ENOSYS (an older kernel) leaves them, as before.
fn close_inherited(keep_seccomp_fd: bool) -> std::io::Result<()> {
    let seccomp = SECCOMP_FD as u32;
    let ranges: &[(u32, u32)] =
        if keep_seccomp_fd { &[(6, seccomp - 1), (seccomp + 1, u32::MAX)] } else { &[(6, u32::MAX)] };
    for &(first, last) in ranges {
        // SAFETY: close_range only changes descriptor flags of the calling process.
        let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, libc::CLOSE_RANGE_CLOEXEC) };
        if r != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The child's half of [`confine`]: process group, death signal, capabilities, limits,
/// Landlock, inherited descriptors, seccomp.
fn in_child(
    parent: u32,
    ruleset: &mut Option<RulesetCreated>,
    refusal: Option<&mut BpfProgram>,
    clone3: Option<&[seccompiler::sock_filter]>,
    allow_fd: Option<&OwnedFd>,
) -> std::io::Result<()> {
    let os = std::io::Error::last_os_error;
    crate::sandbox::enter_own_group(parent)?;
    drop_capabilities()?;
    // No execve may gain privileges again (set-user-ID files, file capabilities).
    rustix::thread::set_no_new_privs(true)?;
    set_limits()?;
    // Landlock first: its ruleset descriptor may have any number, SECCOMP_FD included, and
    // must not be replaced by the allow-list (restrict_self on a pipe is EINVAL) before use.
    if let Some(r) = ruleset.take() {
        r.restrict_self().map_err(std::io::Error::other)?;
    }
    // SAFETY: plain system calls on descriptors of the calling process.
    unsafe {
        match allow_fd {
            Some(fd) if libc::dup2(fd.as_raw_fd(), SECCOMP_FD) < 0 => return Err(os()),
            Some(_) => {}
            // Never let an inherited descriptor pose as the allow-list (the driver would block
            // reading it).
            None => {
                libc::close(SECCOMP_FD);
            }
        }
    }
    close_inherited(allow_fd.is_some())?;
    if let Some(prog) = refusal {
        let pid = rustix::process::getpid().as_raw_nonzero().get() as u32;
        for insn in prog.iter_mut().filter(|i| i.k == PID_SENTINEL) {
            insn.k = pid;
        }
        seccompiler::apply_filter(prog).map_err(std::io::Error::other)?;
    }
    if let Some(prog) = clone3 {
        seccompiler::apply_filter(prog).map_err(std::io::Error::other)?;
    }
    Ok(())
}

/// Landlock for `guest`: reads under the system's library and configuration folders (qemu-user
/// is dynamically linked and reads `/proc` and `/sys`) and of the image, execute only the
/// program and its ELF interpreter, no writes, no TCP, signals only inside the domain.
fn landlock_ruleset(guest: &Guest<'_>) -> Result<RulesetCreated, landlock::RulesetError> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let (program, reads): (&Path, Vec<PathBuf>) = match guest {
        Guest::Qemu { qemu, image } => {
            let mut reads: Vec<PathBuf> =
                ["/usr", "/lib", "/lib64", "/etc", "/proc", "/sys"].iter().map(PathBuf::from).collect();
            reads.push(image.to_path_buf());
            (qemu, reads)
        }
        Guest::Native { image, .. } => (image, Vec::new()),
    };
    let mut exec: Vec<PathBuf> = vec![program.to_path_buf()];
    exec.extend(interpreter_of(program));
    let mut created = empty_ruleset()?;
    for p in &reads {
        if let Ok(fd) = PathFd::new(p) {
            created = created.add_rule(PathBeneath::new(fd, read))?;
        }
    }
    for p in &exec {
        if let Ok(fd) = PathFd::new(p) {
            created = created.add_rule(PathBeneath::new(fd, AccessFs::Execute | AccessFs::ReadFile))?;
        }
    }
    Ok(created)
}

/// The host's architecture as seccompiler names it.
fn host_arch() -> Result<TargetArch, seccompiler::BackendError> {
    TargetArch::try_from(std::env::consts::ARCH)
}

fn cond(arg: u8, op: Op, value: u64) -> Result<Cond, seccompiler::BackendError> {
    Cond::new(arg, Len::Qword, op, value)
}

fn rule(conds: Vec<Cond>) -> Result<SeccompRule, seccompiler::BackendError> {
    SeccompRule::new(conds)
}

/// Host system calls a guest process may not make (trapped: SIGSYS). `exec_path` is the address
/// of the program path the child passes to its one `execve` (the `Command`'s own string), so
/// only that `execve` passes; the guest's pid is `PID_SENTINEL` until the child patches it.
/// `native`: the x86_64 driver forks one batch child per batch (`clone(SIGCHLD)`, nothing
/// shared), which then asks for SIGKILL when its parent dies; qemu-user may do neither.
///
/// # Errors
/// Only a seccompiler error (an unsupported host architecture).
pub fn refusal_filter(exec_path: u64, native: bool) -> Result<BpfProgram, seccompiler::Error> {
    use libc::*;
    let pid = u64::from(PID_SENTINEL);
    let always = || Ok::<_, seccompiler::BackendError>(vec![]);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let flags_write = |arg: u8| -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        [O_WRONLY, O_RDWR, O_CREAT, O_TRUNC]
            .iter()
            .map(|&bit| rule(vec![cond(arg, Op::MaskedEq(bit as u64), bit as u64)?]))
            .collect()
    };
    for nr in [
        SYS_vfork,
        SYS_fork,
        SYS_execveat,
        SYS_tkill,
        SYS_pidfd_open,
        SYS_pidfd_send_signal,
        SYS_pidfd_getfd,
        SYS_socket,
        SYS_socketpair,
        SYS_ptrace,
        SYS_process_vm_readv,
        SYS_process_vm_writev,
        SYS_setsid,
        SYS_setpgid,
        SYS_creat,
        SYS_openat2,
        SYS_open_by_handle_at,
        SYS_io_uring_setup,
    ] {
        rules.insert(nr, always()?);
    }
    // What only an administrator does: with no capability they would fail with EPERM, which a
    // kernel could probe quietly; trapped, each is a finding that names the call.
    for nr in PRIVILEGED {
        rules.insert(nr, always()?);
    }
    let mut not_thread = vec![cond(0, Op::MaskedEq(CLONE_THREAD as u64), 0)?];
    if native {
        not_thread.push(cond(0, Op::Ne, SIGCHLD as u64)?);
    }
    rules.insert(SYS_clone, vec![rule(not_thread)?]);
    rules.insert(SYS_execve, vec![rule(vec![cond(0, Op::Ne, exec_path)?])?]);
    for nr in [SYS_kill, SYS_tgkill, SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo] {
        rules.insert(nr, vec![rule(vec![Cond::new(0, Len::Dword, Op::Ne, pid)?])?]);
    }
    // Changing the death signal to anything but SIGKILL (clearing it included).
    rules.insert(
        SYS_prctl,
        vec![rule(vec![cond(0, Op::Eq, PR_SET_PDEATHSIG as u64)?, cond(1, Op::Ne, SIGKILL as u64)?])?],
    );
    rules.insert(SYS_open, flags_write(1)?);
    rules.insert(SYS_openat, flags_write(2)?);
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Trap, host_arch()?)?;
    filter.try_into().map_err(seccompiler::Error::Backend)
}

/// The witness's filter for a qemu-user guest (witness.rs): stops the guest for its tracer
/// (`SECCOMP_RET_TRACE`) at every call that changes mappings or grants a protection (an
/// `mprotect` to `PROT_NONE` only removes rights), at `read` of the request fd, `write` of the
/// reply fd, and `getppid` (the drivers' marker after their protection table is in force);
/// everything else passes.
///
/// # Errors
/// Only a seccompiler error (an unsupported host architecture).
pub fn witness_filter() -> Result<BpfProgram, seccompiler::Error> {
    use libc::*;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // A change to PROT_NONE only takes rights away (it can hide no access): not stopped. The
    // driver's guards are most of its calls (one per guard page).
    for nr in [SYS_mprotect, SYS_pkey_mprotect] {
        rules.insert(nr, vec![rule(vec![cond(2, Op::Ne, PROT_NONE as u64)?])?]);
    }
    for nr in [SYS_mmap, SYS_munmap, SYS_mremap, SYS_madvise, SYS_remap_file_pages, SYS_shmat, SYS_shmdt, SYS_getppid] {
        rules.insert(nr, vec![]);
    }
    rules.insert(SYS_read, vec![rule(vec![cond(0, Op::Eq, crate::protocol::fd::REQUEST)?])?]);
    rules.insert(SYS_write, vec![rule(vec![cond(0, Op::Eq, crate::protocol::fd::REPLY)?])?]);
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Trace(0), host_arch()?)?;
    filter.try_into().map_err(seccompiler::Error::Backend)
}

/// System calls of administration (capabilities(7): CAP_SYS_BOOT, CAP_SYS_ADMIN,
/// CAP_SYS_MODULE, CAP_SYS_TIME, CAP_SYSLOG, CAP_SYS_RAWIO, CAP_SETUID/SETGID, CAP_BPF,
/// CAP_PERFMON...) that neither qemu-user nor a kernel under test has any use for.
const PRIVILEGED: [i64; 41] = {
    use libc::*;
    [
        SYS_reboot,
        SYS_sethostname,
        SYS_setdomainname,
        SYS_syslog,
        SYS_kexec_load,
        SYS_kexec_file_load,
        SYS_init_module,
        SYS_finit_module,
        SYS_delete_module,
        SYS_mount,
        SYS_umount2,
        SYS_pivot_root,
        SYS_chroot,
        SYS_swapon,
        SYS_swapoff,
        SYS_acct,
        SYS_settimeofday,
        SYS_clock_settime,
        SYS_adjtimex,
        SYS_clock_adjtime,
        SYS_unshare,
        SYS_setns,
        SYS_bpf,
        SYS_perf_event_open,
        SYS_keyctl,
        SYS_add_key,
        SYS_request_key,
        SYS_quotactl,
        SYS_iopl,
        SYS_ioperm,
        SYS_userfaultfd,
        SYS_fanotify_init,
        SYS_open_tree,
        SYS_move_mount,
        SYS_fsopen,
        SYS_fsmount,
        SYS_setuid,
        SYS_setgid,
        SYS_setresuid,
        SYS_setresgid,
        SYS_setgroups,
    ]
};

/// `clone3` fails with ENOSYS: its flags live in memory a filter cannot read, and glibc then
/// falls back to `clone`, whose flags [`refusal_filter`] checks.
fn clone3_filter() -> Result<BpfProgram, seccompiler::Error> {
    let rules = BTreeMap::from([(libc::SYS_clone3, vec![])]);
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), host_arch()?)?;
    filter.try_into().map_err(seccompiler::Error::Backend)
}

/// The native guest's allow-list, installed by the x86_64 driver after its set-up: `read` from
/// the request fd, `write` to the reply fd (protocol::fd), `mprotect` of ranges starting in one
/// of `protectable` (`[start, end)`: `lab_arena`, the kernels' data), at most that range's
/// length, no `PROT_EXEC`; `rt_sigreturn` (the handler's restorer) and `exit_group`; and what
/// the batch child needs before its [`batch_filter`]: `clone(SIGCHLD)`, `wait4`,
/// `rt_sigprocmask`, `prctl` of the death signal (SIGKILL) or of syscall user dispatch,
/// `seccomp(SECCOMP_SET_MODE_FILTER)`. Kernel code never runs under this list alone: it runs
/// in the batch child. Anything else traps (SIGSYS), and the driver's handler reports it with
/// the call's number.
///
/// # Errors
/// Only a seccompiler error.
pub fn native_allow_list(protectable: &[(u64, u64)]) -> Result<BpfProgram, seccompiler::Error> {
    use libc::*;
    const PR_SET_SYSCALL_USER_DISPATCH: u64 = 59;
    const SECCOMP_SET_MODE_FILTER: u64 = 1;
    let no_exec = || cond(2, Op::MaskedEq(!((PROT_READ | PROT_WRITE) as u64)), 0);
    let mprotect = protectable
        .iter()
        .map(|&(start, end)| {
            rule(vec![cond(0, Op::Ge, start)?, cond(0, Op::Lt, end)?, cond(1, Op::Le, end - start)?, no_exec()?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    let rules = BTreeMap::from([
        (SYS_read, vec![rule(vec![cond(0, Op::Eq, crate::protocol::fd::REQUEST)?])?]),
        (SYS_write, vec![rule(vec![cond(0, Op::Eq, crate::protocol::fd::REPLY)?])?]),
        (SYS_mprotect, mprotect),
        (SYS_rt_sigreturn, vec![]),
        (SYS_exit_group, vec![]),
        (SYS_clone, vec![rule(vec![cond(0, Op::Eq, SIGCHLD as u64)?])?]),
        (SYS_wait4, vec![]),
        (SYS_rt_sigprocmask, vec![]),
        // The drivers' marker after their protection table (the witness's, under qemu-user).
        (SYS_getppid, vec![]),
        (
            SYS_prctl,
            vec![
                rule(vec![cond(0, Op::Eq, PR_SET_PDEATHSIG as u64)?, cond(1, Op::Eq, SIGKILL as u64)?])?,
                rule(vec![cond(0, Op::Eq, PR_SET_SYSCALL_USER_DISPATCH)?])?,
            ],
        ),
        (SYS_seccomp, vec![rule(vec![cond(0, Op::Eq, SECCOMP_SET_MODE_FILTER)?])?]),
    ]);
    let filter = SeccompFilter::new(rules, SeccompAction::Trap, SeccompAction::Allow, TargetArch::x86_64)?;
    filter.try_into().map_err(seccompiler::Error::Backend)
}

/// The filter a native batch child installs after the protections are laid and before the
/// first kernel call (x86_64 driver, `.Lbatch_child`): only `write` to the reply fd and
/// `exit_group`. Everything the driver does not need while calls run traps (SIGSYS) and is a
/// finding naming the call: `mprotect`, `pkey_mprotect`, `mmap`, `munmap`, `mremap`,
/// `madvise`, `rt_sigaction`, `sigaltstack`, `prctl`, `seccomp`, `rt_sigreturn` (the child's
/// fault handler replies and exits, it never returns), `read` of the next request (the
/// parent's).
///
/// # Errors
/// Only a seccompiler error.
pub fn batch_filter() -> Result<BpfProgram, seccompiler::Error> {
    use libc::*;
    let rules = BTreeMap::from([
        (SYS_write, vec![rule(vec![cond(0, Op::Eq, crate::protocol::fd::REPLY)?])?]),
        (SYS_exit_group, vec![]),
    ]);
    let filter = SeccompFilter::new(rules, SeccompAction::Trap, SeccompAction::Allow, TargetArch::x86_64)?;
    filter.try_into().map_err(seccompiler::Error::Backend)
}

/// A pipe whose read end holds, followed by EOF, the byte length of `allow` (u64), then
/// `allow` and `batch` as raw `struct sock_filter`s (the x86_64 driver's
/// `lab_seccomp_install`).
fn filter_pipe(allow: &BpfProgram, batch: &BpfProgram) -> std::io::Result<OwnedFd> {
    let (reader, mut writer) = std::io::pipe()?;
    let mut bytes = Vec::with_capacity(8 + (allow.len() + batch.len()) * 8);
    bytes.extend_from_slice(&(allow.len() as u64 * 8).to_ne_bytes());
    for i in allow.iter().chain(batch) {
        bytes.extend_from_slice(&i.code.to_ne_bytes());
        bytes.extend_from_slice(&[i.jt, i.jf]);
        bytes.extend_from_slice(&i.k.to_ne_bytes());
    }
    // A pipe holds 64 KiB; the program is a few hundred bytes.
    writer.write_all(&bytes)?;
    drop(writer);
    // Above the fds the protocol hands over (3-5), so that their dup2 cannot overwrite it.
    let reader = OwnedFd::from(reader);
    Ok(rustix::io::fcntl_dupfd_cloexec(&reader, 10)?)
}

/// The Linux name of system call `nr` on `arch` (crate `syscalls`), if it has one.
pub fn syscall_name(arch: crate::variant::Arch, nr: u64) -> Option<&'static str> {
    (arch.spec().syscall.name)(usize::try_from(nr).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variant::Arch;

    #[test]
    fn refused_calls_are_named_per_architecture() {
        assert_eq!(syscall_name(Arch::X86_64, 85), Some("creat"));
        assert_eq!(syscall_name(Arch::Aarch64, 56), Some("openat"));
        assert_eq!(syscall_name(Arch::Riscv64, 129), Some("kill"));
        assert_eq!(syscall_name(Arch::X86_64, 100_000), None);
    }

    /// The four signal calls compare their pid with the sentinel the child patches; nothing else
    /// may carry the sentinel's value, or the patch would change it too.
    #[test]
    fn the_refusal_filter_carries_the_pid_sentinel_once_per_signal_call() {
        let prog = refusal_filter(0x1234_5678, true).unwrap();
        assert_eq!(prog.iter().filter(|i| i.k == PID_SENTINEL).count(), 4);
    }

    #[test]
    fn the_interpreter_of_a_dynamic_program_is_found_and_a_script_has_none() {
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let interp = interpreter_of(&sh).expect("/bin/sh is dynamically linked");
        assert!(interp.to_string_lossy().contains("ld-linux"), "{}", interp.display());
        assert!(interp.exists());
        let script = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(script.path(), b"#!/bin/sh\n").unwrap();
        assert_eq!(interpreter_of(script.path()), None);
    }

    #[test]
    fn the_native_filters_fit_the_driver_buffer() {
        let prog = native_allow_list(&[(0x40_0000, 0x40_0000 + (32 << 20)), (0x20_0000, 0x20_1000)]).unwrap();
        assert!(!prog.is_empty() && prog.len() <= 4096, "{} instructions", prog.len());
        let batch = batch_filter().unwrap();
        assert!(!batch.is_empty() && batch.len() <= 4096, "{} instructions", batch.len());
        let mut pipe = std::fs::File::from(filter_pipe(&prog, &batch).unwrap());
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut pipe, &mut bytes).unwrap();
        assert_eq!(u64::from_ne_bytes(bytes[..8].try_into().unwrap()), prog.len() as u64 * 8);
        assert_eq!(bytes.len(), 8 + 8 * (prog.len() + batch.len()));
    }
}
