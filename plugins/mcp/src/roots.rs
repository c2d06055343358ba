//! Roots: what a server may work on. The client answers `roots/list` with the workspace root.
// Roots are deprecated by SEP-2577 for the stateless protocol; this client speaks the
// initialize-handshake protocol, where servers (and the conformance suite) still use them.
#![allow(
    deprecated,
    reason = "roots are deprecated by SEP-2577 for the stateless protocol only"
)]

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rmcp::model::Root;

/// `path` as a `file://` URI: every byte but the unreserved characters (RFC 3986) and `/`
/// percent-encoded, so spaces, `#`, `?` and non-UTF-8 bytes survive the trip.
///
/// # Examples
/// ```
/// assert_eq!(cordis_mcp::file_uri(std::path::Path::new("/srv/my data")), "file:///srv/my%20data");
/// ```
pub fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// The root for the workspace at `path`, named for its last component.
pub(crate) fn root(path: &Path) -> Root {
    let mut root = Root::new(file_uri(path));
    root.name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .or_else(|| Some("/".to_owned()));
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_percent_encoded_file_uris() {
        assert_eq!(file_uri(Path::new("/")), "file:///");
        assert_eq!(
            file_uri(Path::new("/a b/c#d?é")),
            "file:///a%20b/c%23d%3F%C3%A9"
        );
        let r = root(Path::new("/work/proj"));
        assert_eq!(
            (r.uri.as_str(), r.name.as_deref()),
            ("file:///work/proj", Some("proj"))
        );
    }
}
