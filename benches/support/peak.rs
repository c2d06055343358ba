//! Peak-memory measurements for the benches that print them (included with `#[path]`): each
//! size runs in a fresh process, so one size's freed memory does not hide the next one's.
#![allow(
    dead_code,
    reason = "included by several benches; each uses only some of it"
)]

/// A line of `/proc/self/status`, in KiB (`VmRSS:`, `VmHWM:`).
pub fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Resets the peak (`VmHWM`) to the current resident set (Linux 4.0+).
pub fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The bench's `main`: with `FLAG N`, measures `N` in this process; without, runs itself once
/// per value of `values` (a fresh process each). `--list` (from `cargo test --benches`) lists
/// nothing.
pub fn run_each(flag: &str, values: &[&str], measure: impl FnOnce(u64)) {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if let Some(n) = args
        .iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
    {
        measure(n);
        return;
    }
    let me = std::env::current_exe().expect("this bench's path");
    for value in values {
        let status = std::process::Command::new(&me)
            .args([flag, value])
            .status()
            .expect("running the bench again");
        assert!(status.success());
    }
}
