//! The reaper: the process between the host and a command, which outlives the command only long
//! enough to kill everything it started.
//!
//! It is the forked child itself, before `exec`: `pre_exec` makes it a child subreaper, forks
//! the command (which applies the sandbox, returns from `pre_exec` and execs), and never
//! returns: it waits, kills, and exits. Between `fork` and `exec` of a multi-threaded program only async-signal-safe calls
//! are allowed, so this module uses raw system calls, stack buffers and no allocation.
#![allow(unsafe_code, reason = "raw system calls between `fork` and `exec`")]

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The highest capability number this code knows (`CAP_CHECKPOINT_RESTORE`, linux 5.9); a
/// higher one the kernel has is refused by `PR_CAPBSET_DROP` harmlessly or dropped too.
const CAP_LAST: libc::c_ulong = 63;

/// Set by the reaper's `SIGTERM` handler: stop the command now.
static STOP: AtomicBool = AtomicBool::new(false);

/// The command's pid, once forked (0 before): the handler kills it itself, so a `SIGTERM`
/// landing between the loop's check and its `waitpid` is not lost.
static COMMAND: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_term(_signal: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
    let command = COMMAND.load(Ordering::SeqCst);
    if command > 0 {
        // SAFETY: kill(2) is async-signal-safe; the pid is the reaper's own unreaped child.
        unsafe {
            let _ = libc::kill(command, libc::SIGKILL);
        }
    }
}

/// Makes `command` apply its restrictions in the child before `exec` (the Landlock ruleset
/// `landlock`, the seccomp program `seccomp`), under a reaper when `reap`.
pub(crate) fn install(
    command: &mut tokio::process::Command,
    landlock: Option<RawFd>,
    seccomp: Option<seccompiler::BpfProgram>,
    reap: bool,
) {
    let hook = move || {
        if reap {
            become_reaper()?;
        }
        confine(landlock, seccomp.as_deref())
    };
    // SAFETY: the closure runs in the forked child before exec and uses only async-signal-safe
    // calls (prctl, sigaction, fork, close_range, waitpid, open, read, close, kill, _exit,
    // landlock_restrict_self, seccomp) on memory it owns or the stack; it allocates nothing and
    // takes no lock.
    unsafe {
        let _ = command.pre_exec(hook);
    }
}

/// In the command's process: restricts it (no new privileges, the Landlock domain, the seccomp
/// filter), or fails the spawn.
fn confine(
    landlock: Option<RawFd>,
    seccomp: Option<&[seccompiler::sock_filter]>,
) -> io::Result<()> {
    if landlock.is_none() && seccomp.is_none() {
        return Ok(());
    }
    // SAFETY: prctl, landlock_restrict_self and seccomp read only the arguments given: a
    // descriptor the parent keeps open until the spawn returns, and a program in this process's
    // memory that outlives the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(fd) = landlock {
            // No capability survives into the sandbox (root's capabilities after exec come from
            // the bounding set): without CAP_SYS_PTRACE no process of it can read a
            // non-dumpable process's memory (the host's, the reaper's). A user without
            // CAP_SETPCAP cannot drop them (EPERM) and has none to drop.
            for cap in 0..=CAP_LAST {
                let _ = libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(program) = seccomp {
            let fprog = libc::sock_fprog {
                len: program.len() as libc::c_ushort,
                filter: program.as_ptr() as *mut libc::sock_filter,
            };
            if libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &fprog as *const libc::sock_fprog,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Makes the calling process not dumpable.
pub(crate) fn not_dumpable() -> io::Result<()> {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) changes one attribute of this process and reads no
    // memory.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `SIGTERM` to the reaper `pid`, and `SIGCONT` in case the command stopped it.
pub(crate) fn stop(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) with a pid the caller owns (its child, not yet reaped by tokio as long as
    // the `Child` lives) and constant signals.
    unsafe {
        let _ = libc::kill(pid, libc::SIGTERM);
        let _ = libc::kill(pid, libc::SIGCONT);
    }
}

/// In the forked child: returns `Ok` only in the command's process (which then execs).
fn become_reaper() -> io::Result<()> {
    // SAFETY (whole function): async-signal-safe system calls only, see `install`.
    unsafe {
        // A session of its own: the command has no controlling terminal, so it cannot open
        // the host's `/dev/tty` (and push keystrokes into it with TIOCSTI); the reaper is the
        // leader of its process group, whose id the host knows.
        if libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        // The reaper stays outside the sandbox, with a copy of the host's memory (its
        // environment): not dumpable, so no process of another user can read it; the sandbox's
        // Landlock domain keeps the command's own tree out.
        let _ = libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        // Installed before the fork so that no SIGTERM is lost in between; exec resets it to
        // the default in the command.
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_term as *const () as usize;
        action.sa_flags = 0; // no SA_RESTART: waitpid returns EINTR
        let _ = libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        // The host going away (a crash) stops the command too; a host already gone is seen
        // by the parent check.
        let host = libc::getppid();
        let _ = libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
        if libc::getppid() != host {
            STOP.store(true, Ordering::SeqCst);
        }
        let command = libc::fork();
        if command < 0 {
            return Err(io::Error::last_os_error());
        }
        if command == 0 {
            // The command: no reaper's death signal, and exec resets the SIGTERM handler.
            let _ = libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0);
            return Ok(());
        }
        COMMAND.store(command, Ordering::SeqCst);
        reap(command)
    }
}

/// The reaper's life: wait for the command (or `SIGTERM`), kill what is left, exit with the
/// command's status.
unsafe fn reap(command: libc::pid_t) -> ! {
    // SAFETY: see `install`.
    unsafe {
        // Holding no descriptor: the host's pipes close when the command's tree is gone, and
        // std's exec-error pipe closes at the command's exec.
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            // Before Linux 5.9 (or a seccomp profile refusing it): one by one.
            let mut limit: libc::rlimit = std::mem::zeroed();
            let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur.min(1 << 16) as libc::c_int
            } else {
                1024
            };
            for fd in 0..top {
                let _ = libc::close(fd);
            }
        }
        let mut status: libc::c_int = 0;
        let mut finished = false;
        while !finished {
            if STOP.load(Ordering::SeqCst) {
                let _ = libc::kill(command, libc::SIGKILL);
            }
            let mut s: libc::c_int = 0;
            let pid = libc::waitpid(-1, &mut s, 0);
            if pid == command {
                status = s;
                finished = true;
            } else if pid < 0 && *libc::__errno_location() == libc::ECHILD {
                break;
            }
        }
        kill_descendants();
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            let _ = libc::signal(signal, libc::SIG_DFL);
            let _ = libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(if finished {
            libc::WEXITSTATUS(status)
        } else {
            127
        })
    }
}

/// Kills the reaper's children until none is left. Orphans of the command's tree are
/// re-parented to the reaper (it is their subreaper), so repeating "kill every child, reap" ends
/// with the whole tree gone; a child is a zombie until reaped here, so its pid cannot be reused
/// before it is killed.
unsafe fn kill_descendants() {
    // SAFETY: see `install`.
    unsafe {
        let mut path = [0u8; 64];
        let _ = children_path(&mut path, libc::getpid());
        let mut unlisted = 0u32;
        loop {
            let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                // No listing (a kernel without CONFIG_PROC_CHILDREN): what is left cannot be
                // found, and waiting for it could take for ever.
                return;
            }
            let mut any = false;
            {
                let mut buf = [0u8; 4096];
                let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                let _ = libc::close(fd);
                let n = if n > 0 { n as usize } else { 0 };
                let mut pid: libc::pid_t = 0;
                let mut digits = false;
                for &b in &buf[..n] {
                    if b.is_ascii_digit() {
                        pid = pid
                            .saturating_mul(10)
                            .saturating_add((b - b'0') as libc::pid_t);
                        digits = true;
                    } else {
                        if digits && pid > 0 {
                            let _ = libc::kill(pid, libc::SIGKILL);
                            any = true;
                        }
                        pid = 0;
                        digits = false;
                    }
                }
                if digits && pid > 0 && n < buf.len() {
                    let _ = libc::kill(pid, libc::SIGKILL);
                    any = true;
                }
            }
            let mut s: libc::c_int = 0;
            // With no child left, waitpid fails with ECHILD: done.
            let reaped = libc::waitpid(-1, &mut s, if any { 0 } else { libc::WNOHANG });
            if reaped < 0 {
                return;
            }
            if reaped == 0 && !any {
                // Children the listing did not show yet (one being re-parented): look again
                // shortly, for at most a second, then leave rather than hang the call.
                unlisted += 1;
                if unlisted > 100 {
                    return;
                }
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 10_000_000,
                };
                let _ = libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
    }
}

/// Writes `/proc/self/task/<pid>/children\0` into `buf` without allocating; returns its length.
fn children_path(buf: &mut [u8; 64], pid: libc::pid_t) -> usize {
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        for &b in bytes {
            buf[len] = b;
            len += 1;
        }
    };
    put(b"/proc/self/task/");
    let mut digits = [0u8; 12];
    let mut n = pid.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    put(&digits[i..]);
    put(b"/children\0");
    len
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_children_path_is_built_without_allocating() {
        let mut buf = [0u8; 64];
        let len = super::children_path(&mut buf, 40213);
        assert_eq!(&buf[..len], b"/proc/self/task/40213/children\0");
    }
}
