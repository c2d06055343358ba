//! Lexically resolved workspace paths.

use std::fmt;
use std::path::{Path, PathBuf};

/// A path inside the workspace: relative to the root, normalized, with no `..` component.
///
/// It only says where the path points lexically; symlinks are judged when it is opened.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkspacePath {
    pub(crate) rel: PathBuf,
    pub(crate) given: String,
}

impl WorkspacePath {
    /// The path relative to the root (empty for the root itself).
    pub fn relative(&self) -> &Path {
        &self.rel
    }

    /// The path as the caller gave it (used in messages).
    pub fn given(&self) -> &str {
        &self.given
    }

    /// True for the root itself.
    pub fn is_root(&self) -> bool {
        self.rel.as_os_str().is_empty()
    }

    /// The components, in order.
    pub(crate) fn components(&self) -> Vec<&std::ffi::OsStr> {
        self.rel.iter().collect()
    }
}

impl fmt::Display for WorkspacePath {
    /// `/`-separated, `.` for the root: the stable form shown to the model.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            return f.write_str(".");
        }
        let parts: Vec<String> = self
            .rel
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        f.write_str(&parts.join("/"))
    }
}
