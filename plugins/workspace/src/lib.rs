//! The workspace boundary shared by the file, search and shell tools.
//!
//! A [`Workspace`] is an opened root directory. Paths from the model are first resolved
//! lexically ([`Workspace::resolve`]: `..` above the root and absolute paths elsewhere are
//! refused), then opened *relative to the root's directory handle*, never by a full path string:
//!
//! - reads use `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` where the kernel has it,
//!   so symlinks that stay inside the root work and any that leave it fail in the kernel;
//! - otherwise (and for every write) the path is walked one component at a time with
//!   `openat(…, O_NOFOLLOW)`, so no symlink is followed at all.
//!
//! Either way the check and the use are the same system call, so a symlink swapped in between
//! them cannot redirect the operation outside the root.
//!
//! The [`WorkspacePlugin`] opens the configured root once and offers it as the `workspace`
//! service, which the file, search and shell tools inject: one boundary. A front end may add
//! roots ([`MoreRoots`]: an editor's additional directories); each is a boundary of its own,
//! entered by absolute paths beneath it, while relative paths stay beneath the root.
//!
//! # Examples
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let ws = cordis_workspace::Workspace::open(dir.path()).unwrap();
//! let path = ws.resolve("notes/todo.txt").unwrap();
//! ws.write_atomic(&path, b"ship it\n").unwrap();
//! assert_eq!(ws.read(&path).unwrap(), b"ship it\n");
//! assert!(ws.resolve("../etc/passwd").is_err());
//! ```

mod error;
mod path;
mod plugin;
mod route;
pub mod snapshot;
mod walk;
mod workspace;

pub use error::{Escape, WorkspaceError};
pub use path::WorkspacePath;
pub use plugin::{MoreRoots, WorkspaceConfig, WorkspacePlugin};
pub use route::{FileRoute, FileRouteService, RouteFuture};
pub use snapshot::Snapshot;
pub use walk::Listing;
pub use workspace::{FileInfo, MAX_MORE_ROOTS, Resolution, Workspace, WriteOutcome};
