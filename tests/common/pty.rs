//! Runs a command in a pseudo-terminal, the way a person runs it: stdin, stdout and stderr are
//! the terminal's slave side, so `is_terminal()` holds in the child and Ctrl-D is the line
//! discipline's end of file, not a closed pipe.

use std::fs::File;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};

/// A child process on a pseudo-terminal, and everything it has written to it so far.
pub struct Pty {
    child: Child,
    master: Option<File>,
    screen: Arc<Mutex<Vec<u8>>>,
    /// Set by `hang_up`: the reader lets go of its copy of the master side.
    closing: Arc<std::sync::atomic::AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Pty {
    /// Starts `cmd` with the terminal as its stdin, stdout and stderr.
    /// `cmd` on a terminal `columns` wide (a fresh pseudo-terminal has no size: programs that
    /// wrap to the width see none).
    pub fn spawn_sized(cmd: Command, columns: u16) -> Pty {
        Pty::spawn_with(cmd, Some(columns))
    }

    pub fn spawn(cmd: Command) -> Pty {
        Pty::spawn_with(cmd, None)
    }

    fn spawn_with(mut cmd: Command, columns: Option<u16>) -> Pty {
        let master =
            openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        if let Some(columns) = columns {
            let size = rustix::termios::Winsize {
                ws_row: 40,
                ws_col: columns,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            rustix::termios::tcsetwinsize(&master, size).expect("set the terminal's size");
        }
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().expect("pty name"))
            .expect("open the slave side");
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        let child = cmd.spawn().expect("spawn");
        let master = File::from(master);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let reader = master.try_clone().unwrap();
        let sink = Arc::clone(&screen);
        let closing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = Arc::clone(&closing);
        // Polls, so that `hang_up` can close every copy of the master side.
        let reader = std::thread::spawn(move || {
            let mut reader = reader;
            let mut buf = [0u8; 4096];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut fds = [rustix::event::PollFd::new(
                    &reader,
                    rustix::event::PollFlags::IN,
                )];
                let timeout = rustix::event::Timespec {
                    tv_sec: 0,
                    tv_nsec: 50_000_000,
                };
                match rustix::event::poll(&mut fds, Some(&timeout)) {
                    Ok(0) | Err(rustix::io::Errno::INTR) => continue,
                    Ok(_) => {}
                    Err(_) => break,
                }
                match reader.read(&mut buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
            }
        });
        Pty {
            child,
            master: Some(master),
            screen,
            closing,
            reader: Some(reader),
        }
    }

    /// Starts `cmd` as the leader of a new session whose controlling terminal is this one
    /// (util-linux `setsid --ctty`, which execs without forking), so Ctrl-C typed here is a
    /// SIGINT to it, as in a real terminal.
    pub fn spawn_controlling(cmd: Command) -> Pty {
        let mut wrapped = Command::new("setsid");
        wrapped
            .arg("--ctty")
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(dir) = cmd.get_current_dir() {
            wrapped.current_dir(dir);
        }
        for (key, value) in cmd.get_envs() {
            match value {
                Some(value) => wrapped.env(key, value),
                None => wrapped.env_remove(key),
            };
        }
        Pty::spawn(wrapped)
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Types `text` (use `"\x04"` for Ctrl-D at the start of a line).
    pub fn send(&mut self, text: &str) {
        let master = self.master.as_mut().expect("the terminal was hung up");
        master.write_all(text.as_bytes()).unwrap();
        master.flush().unwrap();
    }

    /// Everything on the screen so far, as text.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits (at most `limit`) until the screen holds `needle` `count` times; panics with the
    /// screen otherwise (and kills the child, so a hang fails the test instead of the suite).
    pub fn wait_for_count(&mut self, needle: &str, count: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.screen().matches(needle).count() >= count {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!(
            "no {count}× {needle:?} on the terminal within {limit:?}; screen:\n{}",
            self.screen()
        );
    }

    /// Waits (at most `limit`) until the screen holds `needle`.
    pub fn wait_for(&mut self, needle: &str, limit: Duration) {
        self.wait_for_count(needle, 1, limit);
    }

    /// Waits (at most `limit`) for the child to exit and returns its exit code; kills it and
    /// panics with the screen if it does not.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!(
            "the process did not exit within {limit:?}; screen:\n{}",
            self.screen()
        );
    }
}

impl Pty {
    /// Closes the terminal, as closing its window does: the kernel hangs it up (SIGHUP to a
    /// process it controls) and the process's reads and writes on it fail from then on.
    pub fn hang_up(&mut self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.master = None;
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
