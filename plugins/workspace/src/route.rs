//! Where the file tools' reads and writes go once a path passed the workspace check: the disk,
//! unless a front end provides a [`FileRoute`] (an editor, whose buffers hold unsaved edits and
//! which reviews the agent's writes before they reach the disk).
//!
//! A route never widens the boundary: the tools resolve and check every path first (the file
//! must be a regular file beneath the root; a write's parent directories are made here, never
//! through a symlink, and a symlink at the target is refused), and only then hand the route
//! the absolute path. What a route answers is held to the same size limits as the disk.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use cordis_runtime::Service;

/// A boxed future of a route's answer.
pub type RouteFuture<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send>>;

/// Reads and writes text files for the file tools (see the module docs).
pub trait FileRoute: Send + Sync + 'static {
    /// True when the route writes files (else the disk is written).
    fn writes(&self) -> bool {
        true
    }

    /// The text of the file at `path` (absolute, checked), or `None` to read it from disk
    /// (the route does not read files, or cannot vouch for its copy: the disk changed after
    /// it last saw it).
    fn read_text(&self, path: PathBuf) -> RouteFuture<Option<String>>;

    /// Replaces the text of the file at `path` (absolute, checked; its parent exists). Only
    /// called when [`FileRoute::writes`].
    fn write_text(&self, path: PathBuf, content: String) -> RouteFuture<()>;
}

/// The `file-route` service: the route a front end provides for its composition.
#[derive(Clone)]
pub struct FileRouteService(pub Arc<dyn FileRoute>);

impl Service for FileRouteService {
    const NAME: &'static str = "file-route";
}

impl std::fmt::Debug for FileRouteService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileRouteService")
    }
}

/// `rel` beneath `root`, as a route is given it.
pub fn absolute(root: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}
