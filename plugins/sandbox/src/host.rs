//! Blanking the host's initial environment block.

use std::io;
use std::os::unix::fs::FileExt;

/// Where the kernel keeps this process's initial environment (`env_start`, `env_end`: fields
/// 50 and 51 of `/proc/self/stat`).
fn environment_block() -> io::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name, which may hold spaces and parentheses: cut at the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| io::Error::other("unreadable /proc/self/stat"))?;
    // `rest` starts at field 3 (state).
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> io::Result<u64> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| io::Error::other(format!("/proc/self/stat has no field {n}")))
    };
    Ok((field(50)?, field(51)?))
}

/// Moves every variable to the heap (the C library's `setenv` copies it), then overwrites the
/// initial block with zeros through `/proc/self/mem`.
pub(crate) fn blank_environment_block() -> io::Result<()> {
    let (start, end) = environment_block()?;
    if end <= start {
        return Ok(());
    }
    let vars: Vec<_> = std::env::vars_os().collect();
    // A name `set_var` refuses (empty, or holding `=` or NUL, possible through `env`) would be
    // lost by the blanking: keep the block as it is then.
    if let Some((odd, _)) = vars.iter().find(|(name, _)| {
        let bytes = name.as_encoded_bytes();
        bytes.is_empty() || bytes.contains(&b'=') || bytes.contains(&0)
    }) {
        return Err(io::Error::other(format!(
            "the environment holds a variable named {odd:?}, which cannot be moved"
        )));
    }
    for (name, value) in vars {
        if value.as_encoded_bytes().contains(&0) {
            continue;
        }
        // SAFETY: called first thing in `main`, before any other thread exists (the documented
        // contract of `protect_host`), so no one reads the environment meanwhile.
        unsafe { std::env::set_var(name, value) };
    }
    let mem = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")?;
    let zeros = vec![0u8; (end - start) as usize];
    mem.write_all_at(&zeros, start)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_block_is_found_in_proc_self_stat() {
        let (start, end) = super::environment_block().unwrap();
        assert!(end > start, "{start}..{end}");
    }
}
