//! Which files are read: the user's, then the repository's directories from the outermost to
//! the workspace root.

use std::path::{Path, PathBuf};

use crate::source::Place;

/// The most directories above the workspace root the walk looks at for `.git`.
pub const MAX_LEVELS: usize = 64;

/// One file that may hold instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its path as the model sees it (relative to the workspace, `~/.config/…` for the user's).
    pub shown: String,
    /// Where it is.
    pub place: Place,
}

/// The directories instructions are read from, outermost first: from the repository root (the
/// nearest directory at or above `root` holding `.git`) down to `root`; only `root` when no
/// directory within [`MAX_LEVELS`] holds one. Blocks on `stat` calls.
pub fn repository_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut dir = Some(root);
    while let Some(d) = dir {
        dirs.push(d.to_path_buf());
        if d.join(".git").symlink_metadata().is_ok() {
            dirs.reverse();
            return dirs;
        }
        if dirs.len() > MAX_LEVELS {
            break;
        }
        dir = d.parent();
    }
    vec![root.to_path_buf()]
}

/// Every candidate in canonical order: the user's files (in `user_dir`, shown under
/// `user_shown`), then for each directory of [`repository_dirs`] (outermost first) each of
/// `names` in order.
pub fn candidates(root: &Path, names: &[String], user: Option<(&Path, &str)>) -> Vec<Candidate> {
    let mut out = Vec::new();
    if let Some((dir, shown)) = user {
        for name in names {
            out.push(Candidate {
                shown: format!("{shown}/{name}"),
                place: Place::Outside {
                    path: dir.join(name),
                    within: None,
                },
            });
        }
    }
    let dirs = repository_dirs(root);
    let top = dirs[0].clone();
    let depth = dirs.len() - 1;
    for (i, dir) in dirs.iter().enumerate() {
        let up = depth - i;
        for name in names {
            let place = if up == 0 {
                Place::Workspace(PathBuf::from(name))
            } else {
                Place::Outside {
                    path: dir.join(name),
                    within: Some(top.clone()),
                }
            };
            out.push(Candidate {
                shown: format!("{}{name}", "../".repeat(up)),
                place,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_stops_at_the_nearest_directory_holding_git() {
        let tmp = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(tmp.path()).unwrap();
        let repo = top.join("repo");
        let ws = repo.join("a/b");
        std::fs::create_dir_all(&ws).unwrap();
        // A `.git` above the repository does not matter: the nearest one wins.
        std::fs::create_dir(top.join(".git")).unwrap();
        std::fs::create_dir(repo.join(".git")).unwrap();
        assert_eq!(
            repository_dirs(&ws),
            [repo.clone(), repo.join("a"), ws.clone()]
        );
        // A worktree's `.git` is a file.
        std::fs::write(ws.join(".git"), "gitdir: elsewhere").unwrap();
        assert_eq!(repository_dirs(&ws), std::slice::from_ref(&ws));
    }

    #[test]
    fn without_a_repository_only_the_workspace_root_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("w");
        std::fs::create_dir(&ws).unwrap();
        // Assumes no `.git` in the temporary directory's ancestors (as on any test machine).
        assert_eq!(repository_dirs(&ws), [ws]);
    }

    #[test]
    fn candidates_are_the_user_then_outermost_to_innermost_then_names_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = std::fs::canonicalize(tmp.path()).unwrap();
        let ws = repo.join("sub");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir(&ws).unwrap();
        let names = ["AGENTS.md".to_owned(), "CLAUDE.md".to_owned()];
        let user = Path::new("/u/cordis");
        let shown: Vec<String> = candidates(&ws, &names, Some((user, "~/.config/cordis")))
            .into_iter()
            .map(|c| c.shown)
            .collect();
        assert_eq!(
            shown,
            [
                "~/.config/cordis/AGENTS.md",
                "~/.config/cordis/CLAUDE.md",
                "../AGENTS.md",
                "../CLAUDE.md",
                "AGENTS.md",
                "CLAUDE.md"
            ]
        );
        let all = candidates(&ws, &names, None);
        assert_eq!(
            all[0].place,
            Place::Outside {
                path: repo.join("AGENTS.md"),
                within: Some(repo.clone())
            }
        );
        assert_eq!(all[3].place, Place::Workspace("CLAUDE.md".into()));
    }
}
