//! Confinement of the build tools (clang, ld.lld): kernel sources are untrusted input, and an
//! assembler directive such as `.incbin "/etc/passwd"`, `.incbin "/dev/zero"` or the `.incbin`
//! of a FIFO must neither copy host files into an image (and from there into every report) nor
//! exhaust the host nor hang the lab (issue 28, deliverable 4).
//!
//! Every tool invocation ([`run`]):
//! - runs in its own process group with `PR_SET_PDEATHSIG` = `SIGKILL`, registered with
//!   [`crate::interrupt`], so SIGINT/SIGTERM kill it (and whatever it started) at once and a
//!   second signal, which exits the lab, leaves no orphan;
//! - is restricted by Landlock (crate `landlock`, the ruleset pattern of
//!   [`crate::backend::confine`]): it may read the toolchain (the program's install prefix, the
//!   system library folders, the loader cache and the few `/etc` files clang's distribution
//!   detection reads), the *regular files* named by [`Grants`] (each one by its own rule, so a
//!   FIFO, socket or device is never readable, wherever it lies, even inside the kernels
//!   folder), and read and write its build's temporary folder; it may execute only the program
//!   and its ELF interpreter; no `/dev`, no `/proc`, no TCP, no signals out of its domain;
//! - has resource limits: [`FILE_SIZE_LIMIT`] on every file it writes (`RLIMIT_FSIZE`: the
//!   kernel sends `SIGXFSZ`), [`ADDRESS_SPACE_LIMIT`] (`RLIMIT_AS`; clang and ld.lld need
//!   less than 256 MiB for the lab's kernels), no core files, and a wall-clock limit
//!   ([`WALL_LIMIT`]) after which its process group is killed;
//! - keeps at most [`STDERR_LIMIT`] bytes of its standard error (the rest is counted).
//!
//! Sources: landlock(7) (rules on a file apply to that inode; "access rights ... do not
//! distinguish file types" for directories, which is why folders are granted file by file);
//! setrlimit(2) (`RLIMIT_FSIZE`, `RLIMIT_AS`, `RLIMIT_CORE`); pidfd_open(2) and poll(2) (the
//! wall-clock wait). Where the kernel lacks Landlock, the other layers still apply and
//! [`gaps`] says what is missing (a run warning, lab/src/run.rs).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use landlock::{AccessFs, PathBeneath, PathFd, RulesetCreated, RulesetCreatedAttr};

use crate::sandbox::Support;

/// Wall-clock time one tool invocation may take (the lab's largest kernel assembles in well
/// under a second; a FIFO or a `.rept` of millions waits here at most).
pub const WALL_LIMIT: Duration = Duration::from_secs(60);
/// Largest file a tool may write (`RLIMIT_FSIZE`): the lab's images are under 1 MiB.
pub const FILE_SIZE_LIMIT: u64 = 64 << 20;
/// Address-space limit of a tool (`RLIMIT_AS`): clang and ld.lld build the lab's kernels in
/// 256 MiB (measured with `prlimit --as`); `.incbin` of a large file or `.zero` of gigabytes
/// stops here instead of growing clang to the host's memory.
pub const ADDRESS_SPACE_LIMIT: u64 = 1 << 30;
/// Bytes of a tool's standard error kept for the error message.
pub const STDERR_LIMIT: usize = 64 << 10;

/// What one tool invocation may read and write, besides the toolchain itself.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Regular files it may read, each one alone (the lab's driver, the user's objects).
    pub files: Vec<PathBuf>,
    /// Folders whose regular files (directly inside, not in subfolders) it may read: the
    /// kernel sources' own folders.
    pub folders: Vec<PathBuf>,
    /// Folders read beneath, whatever their files: only the lab's own (the cache's folder of
    /// driver objects, which a concurrent build may replace by an identical file at any time,
    /// so a rule on one file's inode would not do).
    pub trees: Vec<PathBuf>,
    /// The build's temporary folder: read, create, write and remove files there (it holds
    /// the generated include folder, the preprocessed sources and the objects).
    pub scratch: Option<PathBuf>,
}

/// Limits of one tool invocation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wall-clock time before the process group is killed.
    pub wall: Duration,
    /// `RLIMIT_FSIZE` in bytes.
    pub file_size: u64,
    /// `RLIMIT_AS` in bytes.
    pub address_space: u64,
}

impl Limits {
    /// The limits builds run with: [`WALL_LIMIT`], [`FILE_SIZE_LIMIT`], [`ADDRESS_SPACE_LIMIT`].
    pub const BUILD: Limits =
        Limits { wall: WALL_LIMIT, file_size: FILE_SIZE_LIMIT, address_space: ADDRESS_SPACE_LIMIT };
}

/// How a confined tool invocation ended.
#[derive(Debug)]
pub struct Outcome {
    /// The exit status (a signal for a killed tool).
    pub status: ExitStatus,
    /// The first [`STDERR_LIMIT`] bytes of its standard error, with a line counting the rest.
    pub stderr: String,
    /// It ran past [`Limits::wall`] and its process group was killed.
    pub timed_out: bool,
}

impl Outcome {
    /// Why a failed run stopped, when a limit or a signal stopped it (not the tool's own error).
    pub fn limit_hit(&self, limits: &Limits) -> Option<String> {
        if self.timed_out {
            return Some(format!("ran longer than {} s and was killed", limits.wall.as_secs()));
        }
        match self.status.signal() {
            Some(libc::SIGXFSZ) => {
                Some(format!("tried to write a file larger than {} MiB and was stopped", limits.file_size >> 20))
            }
            Some(libc::SIGKILL) => Some("was killed (SIGKILL)".into()),
            // LLVM's own words when an allocation fails (not a user's `.error "out of memory"`).
            _ if self.stderr.contains("LLVM ERROR: out of memory") || self.stderr.contains("std::bad_alloc") => {
                Some(format!("ran out of its {} MiB address space", limits.address_space >> 20))
            }
            _ => None,
        }
    }
}

/// Missing confinement layers for builds, one line each (empty when builds are confined).
pub fn gaps() -> Vec<String> {
    if Support::probe().landlock_abi == 0 {
        return vec!["the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK, lsm=landlock): kernel sources are \
                     assembled with the lab's own file access (time and size limits still apply)"
            .into()];
    }
    Vec::new()
}

/// Runs `cmd` confined by `grants` and `limits` (see the module documentation) and waits for it.
/// Standard input and output are `/dev/null`; standard error is captured (bounded).
///
/// # Errors
/// The run was interrupted before it started, the Landlock ruleset could not be built, or the
/// program could not be started.
pub fn run(cmd: &mut Command, grants: &Grants, limits: &Limits) -> std::io::Result<Outcome> {
    if let Some(sig) = crate::interrupt::interrupted() {
        return Err(std::io::Error::other(format!("interrupted by {}", crate::interrupt::name(sig))));
    }
    let mut ruleset = match Support::probe().landlock_abi {
        0 => None,
        _ => Some(ruleset(cmd.get_program().as_ref(), grants).map_err(std::io::Error::other)?),
    };
    let parent = std::process::id();
    let limits_copy = *limits;
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    // SAFETY: the closure runs in the forked child before exec and makes only system calls
    // (Landlock's restrict_self is a prctl and a landlock_restrict_self on a ruleset built above).
    unsafe {
        cmd.pre_exec(move || in_child(parent, &limits_copy, ruleset.take()));
    }
    let mut child = cmd.spawn()?;
    crate::interrupt::register(child.id());
    let waited = wait_bounded(&mut child, limits.wall);
    crate::interrupt::unregister(child.id());
    let (status, timed_out, stderr) = waited?;
    Ok(Outcome { status, stderr, timed_out })
}

/// The child's half of [`run`]: own process group, death signal, limits, Landlock.
fn in_child(parent: u32, limits: &Limits, ruleset: Option<RulesetCreated>) -> std::io::Result<()> {
    use rustix::process::{self as p, Resource, Rlimit};
    crate::sandbox::enter_own_group(parent)?;
    let set = |resource, value: u64| p::setrlimit(resource, Rlimit { current: Some(value), maximum: Some(value) });
    set(Resource::Fsize, limits.file_size)?;
    set(Resource::As, limits.address_space)?;
    set(Resource::Core, 0)?;
    if let Some(r) = ruleset {
        r.restrict_self().map_err(std::io::Error::other)?;
    }
    Ok(())
}

/// The Landlock ruleset of one invocation of `program` (see the module documentation).
fn ruleset(program: &Path, grants: &Grants) -> Result<RulesetCreated, landlock::RulesetError> {
    let dir_read = AccessFs::ReadFile | AccessFs::ReadDir;
    let scratch = dir_read
        | AccessFs::WriteFile
        | AccessFs::MakeReg
        | AccessFs::RemoveFile
        | AccessFs::Truncate
        | AccessFs::Refer;
    let toolchain = toolchain_of(program);
    let mut created = crate::sandbox::empty_ruleset()?;
    for p in toolchain.folders.iter().chain(&grants.trees) {
        created = add(created, p, dir_read)?;
    }
    for p in toolchain.files.iter().chain(&grants.files).chain(&regular_files(&grants.folders)) {
        created = add(created, p, AccessFs::ReadFile.into())?;
    }
    for p in &toolchain.exec {
        created = add(created, p, AccessFs::Execute | AccessFs::ReadFile)?;
    }
    if let Some(dir) = &grants.scratch {
        created = add(created, dir, scratch)?;
    }
    Ok(created)
}

/// `created` with a rule granting `access` beneath `path` (a path that cannot be opened is
/// left out: nothing there to grant).
fn add(
    created: RulesetCreated,
    path: &Path,
    access: landlock::BitFlags<AccessFs>,
) -> Result<RulesetCreated, landlock::RulesetError> {
    match PathFd::new(path) {
        Ok(fd) => created.add_rule(PathBeneath::new(fd, access)),
        Err(_) => Ok(created),
    }
}

/// The regular files directly inside `folders` (symbolic links are not followed: a link to a
/// regular file of the folder reaches it through that file's own rule, any other link nothing).
fn regular_files(folders: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in folders {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        out.extend(entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_file())).map(|e| e.path()));
    }
    out
}

/// What running one build program needs from the host.
#[derive(Debug, Clone, Default)]
struct Toolchain {
    /// Folders read beneath: the program's install prefix (clang's resource folder is in it)
    /// and the system library folders.
    folders: Vec<PathBuf>,
    /// Single files read: the loader cache and what clang's distribution detection reads.
    files: Vec<PathBuf>,
    /// The program itself and its ELF interpreter.
    exec: Vec<PathBuf>,
}

/// The toolchain grants of `program`, computed once per program.
fn toolchain_of(program: &Path) -> Toolchain {
    static CACHE: OnceLock<std::sync::Mutex<Vec<(PathBuf, Toolchain)>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(t) = cache.lock().ok().and_then(|c| c.iter().find(|(p, _)| p == program).map(|(_, t)| t.clone())) {
        return t;
    }
    let t = toolchain_uncached(program);
    if let Ok(mut c) = cache.lock() {
        c.push((program.to_path_buf(), t.clone()));
    }
    t
}

fn toolchain_uncached(program: &Path) -> Toolchain {
    let real = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
    // `<prefix>/bin/clang`: the prefix holds clang's resource folder (`lib/clang/<version>`).
    let prefix = real.parent().and_then(Path::parent).filter(|p| p.parent().is_some());
    let mut folders: Vec<PathBuf> =
        ["/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/local/lib"]
            .iter()
            .map(PathBuf::from)
            .collect();
    folders.extend(prefix.map(Path::to_path_buf));
    let files = ["/etc/ld.so.cache", "/etc/os-release", "/etc/lsb-release", "/etc/debian_version"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let mut exec = vec![real.clone()];
    exec.extend(crate::sandbox::interpreter_of(&real));
    Toolchain { folders, files, exec }
}

/// Waits for `child` at most `wall`, reading its standard error meanwhile; kills its process
/// group when the time is up. Returns the status, whether it timed out, and the kept stderr.
fn wait_bounded(child: &mut Child, wall: Duration) -> std::io::Result<(ExitStatus, bool, String)> {
    let deadline = Instant::now() + wall;
    let mut stderr = Bounded::default();
    let mut pipe = child.stderr.take();
    let pidfd = pidfd_of(child.id());
    let mut timed_out = false;
    loop {
        if let Some(status) = child.try_wait()? {
            if let Some(p) = pipe.as_mut() {
                drain(p, &mut stderr);
            }
            return Ok((status, timed_out, stderr.text()));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() && !timed_out {
            crate::sandbox::kill_group(child.id());
            timed_out = true;
        }
        // Without a pidfd (Linux < 5.3) the exit is noticed within 10 ms.
        let step = if pidfd.is_some() { left.max(Duration::from_millis(10)) } else { Duration::from_millis(10) };
        if wait_readable(pipe.as_ref().map(AsFd::as_fd), pidfd.as_ref().map(AsFd::as_fd), step)
            && pipe.as_mut().is_some_and(|p| !stderr.read_some(p))
        {
            pipe = None; // EOF
        }
    }
}

/// A pidfd for `pid` (readable once it exits), if the kernel has `pidfd_open`.
fn pidfd_of(pid: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Polls the stderr pipe and the pidfd for up to `timeout`; true when the pipe is readable.
fn wait_readable(pipe: Option<BorrowedFd<'_>>, pidfd: Option<BorrowedFd<'_>>, timeout: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let mut fds: Vec<PollFd<'_>> =
        [pipe, pidfd].into_iter().flatten().map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)).collect();
    let wait = Timespec::try_from(timeout).unwrap_or(Timespec { tv_sec: i64::MAX, tv_nsec: 0 });
    let n = rustix::event::poll(&mut fds, Some(&wait)).unwrap_or(0);
    n > 0 && pipe.is_some() && !fds[0].revents().is_empty()
}

/// Reads what is left in the pipe of an exited tool, without waiting for a process it may
/// have left behind holding the pipe open.
fn drain(pipe: &mut std::process::ChildStderr, out: &mut Bounded) {
    while wait_readable(Some(pipe.as_fd()), None, Duration::ZERO) && out.read_some(pipe) {}
}

/// A tool's standard error: the first [`STDERR_LIMIT`] bytes and a count of the rest.
#[derive(Default)]
struct Bounded {
    kept: Vec<u8>,
    dropped: u64,
}

impl Bounded {
    /// Reads once from `pipe`; false at EOF or on an error.
    fn read_some(&mut self, pipe: &mut impl std::io::Read) -> bool {
        let mut buf = [0u8; 8192];
        match pipe.read(&mut buf) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                let room = STDERR_LIMIT.saturating_sub(self.kept.len()).min(n);
                self.kept.extend_from_slice(&buf[..room]);
                self.dropped += (n - room) as u64;
                true
            }
        }
    }

    fn text(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.kept).into_owned();
        if self.dropped > 0 {
            s.push_str(&format!("\n[... {} more bytes of standard error not kept]", self.dropped));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/bin/sh -c script`: under Landlock the shell may execute nothing else, so the scripts
    /// use builtins only.
    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    /// A tool that never ends is killed with its process group at the wall limit: the shell's
    /// subshell, which keeps re-creating a file, stops too.
    #[test]
    fn a_tool_past_the_wall_limit_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let alive = dir.path().join("alive");
        let script = format!("(while :; do : > {}; done); echo unreachable", alive.display());
        let limits = Limits { wall: Duration::from_millis(500), ..Limits::BUILD };
        let grants = Grants { scratch: Some(dir.path().to_path_buf()), ..Grants::default() };
        let started = Instant::now();
        let out = run(&mut sh(&script), &grants, &limits).unwrap();
        assert!(out.timed_out, "{out:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
        assert_eq!(out.limit_hit(&limits).as_deref(), Some("ran longer than 0 s and was killed"));
        assert!(alive.exists(), "the subshell never ran");
        std::fs::remove_file(&alive).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(!alive.exists(), "the subshell survived its group's kill");
    }

    /// A tool writing past `RLIMIT_FSIZE` is stopped by SIGXFSZ and said so.
    #[test]
    fn a_tool_writing_past_the_file_size_limit_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big");
        let limits = Limits { file_size: 1 << 20, ..Limits::BUILD };
        let grants = Grants { scratch: Some(dir.path().to_path_buf()), ..Grants::default() };
        let script = format!("while :; do echo 0123456789abcdef; done > {}", file.display());
        let out = run(&mut sh(&script), &grants, &limits).unwrap();
        assert_eq!(out.status.signal(), Some(libc::SIGXFSZ), "{out:?}");
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 1 << 20);
        assert!(out.limit_hit(&limits).unwrap().contains("larger than 1 MiB"), "{out:?}");
    }

    /// Reads outside the grants are refused (a host file, a device, a FIFO inside the granted
    /// folder); reads inside them are not; standard error is kept up to its bound.
    #[test]
    fn reads_outside_the_grants_are_refused() {
        if Support::probe().landlock_abi == 0 {
            return; // Nothing to show without Landlock (the run warns instead).
        }
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("own");
        std::fs::create_dir(&own).unwrap();
        std::fs::write(own.join("a.inc"), "granted\n").unwrap();
        let fifo = own.join("fifo");
        let fifo_mode = rustix::fs::Mode::from_raw_mode(0o600);
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, fifo_mode, 0).expect("mkfifo");
        let grants = Grants { folders: vec![own.clone()], ..Grants::default() };
        let script = format!(
            "read x < {0}/a.inc && echo $x >&2; read x < /etc/passwd; read x < /dev/zero; read x < {0}/fifo",
            own.display()
        );
        let limits = Limits { wall: Duration::from_secs(10), ..Limits::BUILD };
        let out = run(&mut sh(&script), &grants, &limits).unwrap();
        assert!(!out.timed_out, "the FIFO was opened: {out:?}");
        assert!(out.stderr.starts_with("granted\n"), "{}", out.stderr);
        assert_eq!(out.stderr.matches("Permission denied").count(), 3, "{}", out.stderr);
        let limits = Limits { wall: Duration::from_millis(300), ..Limits::BUILD };
        let out = run(&mut sh("while :; do echo yyyyyyyy >&2; done"), &grants, &limits).unwrap();
        assert!(out.stderr.len() < STDERR_LIMIT + 100, "{}", out.stderr.len());
        assert!(out.stderr.ends_with("bytes of standard error not kept]"), "{}", &out.stderr[STDERR_LIMIT - 20..]);
    }
}
