//! Listing files under a workspace directory the way ripgrep does (`.gitignore`, `.ignore`).

use std::path::Path;

use crate::error::WorkspaceError;
use crate::path::WorkspacePath;
use crate::workspace::Workspace;

/// Files found by [`Workspace::files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Matching files, sorted by their `/`-separated path.
    pub files: Vec<WorkspacePath>,
    /// True when more files matched than the limit allowed.
    pub truncated: bool,
}

/// The largest ignore file the walk reads.
const MAX_IGNORE_FILE: u64 = 1 << 20;

/// The first ignore file of `dir` that is not a regular file of at most [`MAX_IGNORE_FILE`]
/// bytes (a symlink, a FIFO, a device, a huge file), as its path.
fn hostile_ignore_file(dir: &Path) -> Option<std::path::PathBuf> {
    [".gitignore", ".ignore"].iter().find_map(|name| {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Err(_) => None,
            Ok(m) if m.file_type().is_file() && m.len() <= MAX_IGNORE_FILE => None,
            Ok(_) => Some(path),
        }
    })
}

impl Workspace {
    /// Files under `dir` for which `keep` holds (given the `/`-separated relative path), at most
    /// `limit`, honouring `.gitignore` (inside or outside a git repository), `.ignore` and
    /// `.git/info/exclude` files of the workspace; `.git` itself is skipped. Hidden files are
    /// listed. Symlinks are listed, never followed.
    ///
    /// The walk starts at the root so the root's ignore files apply to subdirectories, and never
    /// reads ignore files above the root.
    ///
    /// # Determinism
    /// The result is sorted; which files count against `limit` follows that order.
    ///
    /// # Errors
    /// An escaping or missing `dir`, or one that is not a directory.
    pub fn files(
        &self,
        dir: &WorkspacePath,
        limit: usize,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Listing, WorkspaceError> {
        if !self.is_dir(dir)? {
            return Err(WorkspaceError::NotADirectory {
                path: dir.given().to_owned(),
            });
        }
        // The walk starts at the root `dir` is beneath (an additional root, maybe).
        let root = self.root_of(dir).to_path_buf();
        let target = dir.relative().to_path_buf();
        if let Some(bad) = hostile_ignore_file(&root) {
            let shown = bad
                .strip_prefix(&root)
                .unwrap_or(&bad)
                .display()
                .to_string();
            return Err(WorkspaceError::NotAFile {
                path: shown,
                kind: "an ignore file must be a regular file of at most 1 MiB: fix or remove it",
            });
        }
        let walker = ignore::WalkBuilder::new(&root)
            .hidden(false)
            .parents(false)
            .git_global(false)
            // `.git/info/exclude` is not read: `.git` may be a file pointing anywhere, or a FIFO.
            .git_exclude(false)
            .require_git(false)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(move |entry| {
                if entry.file_name() == ".git" {
                    return false;
                }
                // The walker reads a directory's ignore files when it enters it, by path and
                // without limits: a FIFO there would hang it, a symlink to /dev/zero would eat
                // memory. Such a directory is not entered.
                if entry.file_type().is_some_and(|t| t.is_dir())
                    && hostile_ignore_file(entry.path()).is_some()
                {
                    return false;
                }
                let rel = entry.path().strip_prefix(&root).unwrap_or(Path::new(""));
                // Descend only along the way to `dir` and below it.
                rel.starts_with(&target) || target.starts_with(rel)
            })
            .build();
        let mut files: Vec<WorkspacePath> = Vec::new();
        let mut truncated = false;
        for entry in walker.flatten() {
            let is_file = entry
                .file_type()
                .is_some_and(|t| t.is_file() || t.is_symlink());
            if !is_file
                || !entry
                    .path()
                    .strip_prefix(self.root_of(dir))
                    .is_ok_and(|r| r.starts_with(dir.relative()))
            {
                continue;
            }
            let Some(path) = self.relativize(entry.path()) else {
                continue;
            };
            if keep(&path.to_string()) {
                files.push(path);
            }
        }
        files.sort_by_cached_key(|p| p.to_string());
        if files.len() > limit {
            files.truncate(limit);
            truncated = true;
        }
        Ok(Listing { files, truncated })
    }
}
