//! The Landlock ruleset and the seccomp filter of a confinement, built before the spawn and
//! applied in the forked child.

use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use crate::{Confinement, Sandbox, SandboxError, SandboxMode};

/// The newest ABI whose rights this crate asks for; newer kernels enforce these too.
const TESTED: ABI = ABI::V6;

/// Devices every sandboxed command may write: exactly what a command needs (`> /dev/null`).
/// Not `/dev/shm` (another program's shared memory, and RAM pinned after the call), nor a
/// terminal (`/dev/pts/N` is the user's, and a command's output reaches them only through
/// cordis, escaped); a command has no controlling terminal, so `/dev/tty` opens nothing.
pub const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Devices a sandboxed command may read: the rest of `/dev` (terminals, shared memory, disks)
/// is neither read nor written.
pub const READABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The Landlock ABI the running kernel reports (`None`: no Landlock, or it is disabled).
#[allow(unsafe_code, reason = "Landlock's ABI query is a raw system call")]
pub fn landlock_abi() -> Option<i32> {
    // SAFETY: `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)` reads no
    // memory and creates nothing: it only returns the ABI version (or -1 with errno).
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    (v > 0).then_some(v as i32)
}

/// A confinement ready to apply in the child: the Landlock ruleset's descriptor and the
/// seccomp program, both made before the fork (the child only makes system calls with them).
pub(crate) struct Prepared {
    pub(crate) landlock: Option<OwnedFd>,
    pub(crate) seccomp: Option<BpfProgram>,
}

fn rules_error(mode: SandboxMode) -> impl Fn(String) -> SandboxError {
    move |detail| SandboxError::Rules { mode, detail }
}

/// Builds the rules of `confinement` (opening the paths they name).
pub(crate) fn prepare(confinement: &Confinement) -> Result<Prepared, SandboxError> {
    match confinement {
        Confinement::None => Ok(Prepared {
            landlock: None,
            seccomp: None,
        }),
        Confinement::ScopeOnly => {
            // Handle every filesystem right and grant it all beneath `/`: nothing is restricted,
            // but the process is in a Landlock domain, so it cannot ptrace the host or read its
            // `/proc/PID/environ`.
            let error = rules_error(SandboxMode::FullAccess);
            let all = AccessFs::from_all(TESTED);
            let created = landlock::Ruleset::default()
                .handle_access(all)
                .map_err(|e| error(e.to_string()))?
                .create()
                .map_err(|e| error(e.to_string()))?
                .add_rules(path_beneath_rules(["/"], all))
                .map_err(|e| error(e.to_string()))?;
            // Best effort: without Landlock the process starts unscoped.
            Ok(Prepared {
                landlock: Option::<OwnedFd>::from(created),
                seccomp: None,
            })
        }
        Confinement::Sandbox(sandbox) if sandbox.mode == SandboxMode::FullAccess => Ok(Prepared {
            landlock: None,
            seccomp: filter(sandbox)?,
        }),
        Confinement::Sandbox(sandbox) => Ok(Prepared {
            landlock: Some(enforced(
                sandbox.mode,
                Option::<OwnedFd>::from(ruleset(sandbox)?),
            )?),
            seccomp: filter(sandbox)?,
        }),
    }
}

fn ruleset(sandbox: &Sandbox) -> Result<RulesetCreated, SandboxError> {
    let error = rules_error(sandbox.mode);
    let e = |e: landlock::RulesetError| error(e.to_string());
    let all = AccessFs::from_all(TESTED);
    let mut ruleset = landlock::Ruleset::default()
        // Filesystem rights are the sandbox: without them the kernel enforces nothing.
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(e)?;
    if !sandbox.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TESTED))
            .map_err(e)?
            .scope(Scope::AbstractUnixSocket)
            .map_err(e)?;
    }
    ruleset = ruleset.scope(Scope::Signal).map_err(e)?;
    let mut writable: Vec<&Path> = vec![sandbox.temp.as_path()];
    if sandbox.mode == SandboxMode::WorkspaceWrite {
        writable.push(&sandbox.workspace);
        writable.extend(sandbox.writable.iter().map(|p| p.as_path()));
    }
    for path in &writable {
        if !path.is_dir() {
            return Err(error(format!(
                "the writable root {} is not a directory",
                path.display()
            )));
        }
    }
    ruleset
        .create()
        .map_err(e)?
        // Listing any directory (names only), reading everything outside `/dev`.
        .add_rules(path_beneath_rules(["/"], AccessFs::ReadDir))
        .map_err(e)?
        .add_rules(path_beneath_rules(
            readable_roots(),
            AccessFs::from_read(TESTED),
        ))
        .map_err(e)?
        .add_rules(path_beneath_rules(
            READABLE_DEVICES,
            AccessFs::from_read(TESTED),
        ))
        .map_err(e)?
        .add_rules(path_beneath_rules(WRITABLE_DEVICES, all))
        .map_err(e)?
        .add_rules(path_beneath_rules(writable, all))
        .map_err(e)
}

/// Every entry of `/` but `/dev`: a command reads anywhere the user can except the devices
/// (Landlock only adds rights, so `/dev` is left out by naming its siblings).
fn readable_roots() -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir("/") else {
        return Vec::new();
    };
    let mut roots: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p != Path::new("/dev"))
        .collect();
    roots.sort();
    roots
}

/// The seccomp program of a sandbox: without network, `socket()` of any family but Unix and
/// netlink (`EACCES`) and io_uring (whose socket operations would bypass the `socket()` check);
/// on a Landlock ABI without truncate rights (before 3), `truncate(2)` too. x32 system calls
/// (x86-64's second table) get the same rules.
fn filter(sandbox: &Sandbox) -> Result<Option<BpfProgram>, SandboxError> {
    let error = rules_error(sandbox.mode);
    let e = |e: seccompiler::BackendError| error(format!("seccomp: {e}"));
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> = Default::default();
    if !sandbox.network {
        let not = |family: i32| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64)
        };
        let other_family = SeccompRule::new(vec![
            not(libc::AF_UNIX).map_err(e)?,
            not(libc::AF_NETLINK).map_err(e)?,
        ])
        .map_err(e)?;
        let _ = rules.insert(libc::SYS_socket, vec![other_family]);
        let _ = rules.insert(libc::SYS_io_uring_setup, Vec::new());
    }
    let old_landlock =
        sandbox.mode != SandboxMode::FullAccess && landlock_abi().is_some_and(|abi| abi < 3);
    if old_landlock {
        let _ = rules.insert(libc::SYS_truncate, Vec::new());
    }
    if rules.is_empty() {
        return Ok(None);
    }
    #[cfg(target_arch = "x86_64")]
    {
        const X32: i64 = 0x4000_0000;
        let x32: Vec<(i64, Vec<SeccompRule>)> =
            rules.iter().map(|(nr, r)| (nr | X32, r.clone())).collect();
        rules.extend(x32);
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|err: seccompiler::BackendError| error(format!("seccomp: {err}")))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(e)?;
    filter.try_into().map(Some).map_err(e)
}

/// Fail closed: a sandbox the kernel cannot enforce (no ruleset descriptor: no Landlock) is an
/// error before anything starts, never a silent fallback.
pub(crate) fn enforced(
    mode: SandboxMode,
    ruleset: Option<OwnedFd>,
) -> Result<OwnedFd, SandboxError> {
    match ruleset {
        Some(fd) => Ok(fd),
        None => Err(SandboxError::Unsupported {
            mode,
            detail: match landlock_abi() {
                None => "this kernel has no Landlock (it needs Linux 5.13 or later with Landlock enabled: `lsm=landlock,…`)".to_owned(),
                Some(abi) => format!("Landlock (ABI {abi}) did not enforce the rules"),
            },
        }),
    }
}
