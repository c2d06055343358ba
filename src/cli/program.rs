//! The name this program was invoked as, for the commands its hints print ("continue it with:
//! NAME run --resume ID", a stress failure's replay commands): a binary that embeds cordis
//! ([`crate::cli::main`] under another name) prints hints that run itself, not a `cordis` that
//! may not be installed.

use std::ffi::OsStr;
use std::sync::RwLock;

/// The program name [`crate::cli::run`] was last given (its first argument), if usable.
static INVOKED: RwLock<Option<String>> = RwLock::new(None);

/// The name used when none is known or usable.
pub const DEFAULT: &str = "cordis";

/// The file name of `argv0` when it can stand in a printed command: not empty, no whitespace,
/// no control characters, valid UTF-8.
fn usable(argv0: &OsStr) -> Option<String> {
    let name = std::path::Path::new(argv0).file_name()?.to_str()?;
    let fits = !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c.is_control());
    fits.then(|| name.to_owned())
}

/// Records `argv0` (the first argument [`crate::cli::run`] got) as the invoked program.
pub fn invoked_as(argv0: Option<&OsStr>) {
    let name = argv0.and_then(usable);
    *INVOKED
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = name;
}

/// The invoked program's file name: the first argument [`crate::cli::run`] was given, else
/// this process's `argv[0]` (`std::env::args_os`), else `cordis`.
pub fn name() -> String {
    if let Some(name) = INVOKED
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
    {
        return name;
    }
    std::env::args_os()
        .next()
        .and_then(|a| usable(&a))
        .unwrap_or_else(|| DEFAULT.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usable_name_is_the_file_name_of_argv0() {
        assert_eq!(
            usable(OsStr::new("/opt/bin/my-agent")).as_deref(),
            Some("my-agent")
        );
        assert_eq!(usable(OsStr::new("cordis")).as_deref(), Some("cordis"));
        assert_eq!(usable(OsStr::new("/bin/two words")), None);
        assert_eq!(usable(OsStr::new("esc\u{1b}[2J")), None);
        assert_eq!(usable(OsStr::new("")), None);
    }
}
