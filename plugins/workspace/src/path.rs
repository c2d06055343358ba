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
    /// The root it is beneath: 0 the workspace's root, then its additional roots.
    pub(crate) base: usize,
    /// An additional root's directory (shown before the path: the model names such paths
    /// absolute); none beneath the root.
    pub(crate) shown: Option<PathBuf>,
}

impl WorkspacePath {
    /// The path relative to its root (empty for the root itself; see [`WorkspacePath::root`]).
    pub fn relative(&self) -> &Path {
        &self.rel
    }

    /// The path as the caller gave it (used in messages).
    pub fn given(&self) -> &str {
        &self.given
    }

    /// The additional root it is beneath, none when it is beneath the workspace's root.
    pub fn root(&self) -> Option<&Path> {
        self.shown.as_deref()
    }

    /// True for a root itself.
    pub fn is_root(&self) -> bool {
        self.rel.as_os_str().is_empty()
    }

    /// The components, in order.
    pub(crate) fn components(&self) -> Vec<&std::ffi::OsStr> {
        self.rel.iter().collect()
    }
}

impl fmt::Display for WorkspacePath {
    /// `/`-separated, `.` for the root: the stable form shown to the model; beneath an
    /// additional root, the absolute path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(root) = &self.shown {
            return f.write_str(&crate::route::absolute(root, &self.rel).to_string_lossy());
        }
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
