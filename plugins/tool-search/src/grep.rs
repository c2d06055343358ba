//! The search itself.

use cordis_workspace::{Workspace, WorkspaceError, WorkspacePath};
use serde::Deserialize;
use serde_json::{Value, json};

/// Configuration of `tool-search`; unknown fields are rejected.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SearchConfig {
    /// Most matches one call returns (a call may ask for fewer).
    pub max_matches: usize,
    /// Longest matching line shown, in characters.
    pub max_line_chars: usize,
    /// Files larger than this are skipped.
    pub max_file_bytes: u64,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            max_matches: 200,
            max_line_chars: 300,
            max_file_bytes: 4 * 1024 * 1024,
        }
    }
}

/// `grep` failed; the message is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum GrepError {
    /// The arguments do not match the schema.
    #[error("invalid grep arguments: {0}")]
    Args(#[source] serde_json::Error),
    /// The pattern does not compile.
    #[error("invalid regex: {0}")]
    Regex(#[from] regex::Error),
    /// A bad glob.
    #[error("invalid glob {pattern:?}: {message}")]
    Glob {
        /// The pattern.
        pattern: String,
        /// The parser's message.
        message: String,
    },
    /// A workspace refusal or I/O error.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default)]
    max_matches: Option<usize>,
}

/// Searches files under `path` (default the root; a file searches just that file) for
/// `pattern`, one `path:line:text` per matching line.
///
/// Ignored (`.gitignore`), binary, unreadable and oversized files, and symlinks leading out of
/// the root, are skipped.
///
/// # Errors
/// Bad arguments, regex or glob, an escaping or missing `path`.
pub fn grep(ws: &Workspace, config: &SearchConfig, arguments: Value) -> Result<Value, GrepError> {
    let a: GrepArgs = serde_json::from_value(arguments).map_err(GrepError::Args)?;
    let regex = regex::RegexBuilder::new(&a.pattern)
        .case_insensitive(a.case_insensitive)
        .size_limit(1 << 22)
        .build()?;
    let glob = match &a.glob {
        None => None,
        Some(g) => Some(
            globset::GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .map_err(|e| GrepError::Glob {
                    pattern: g.clone(),
                    message: e.kind().to_string(),
                })?
                .compile_matcher(),
        ),
    };
    let by_name = a.glob.as_deref().is_some_and(|g| !g.contains('/'));
    let limit = a
        .max_matches
        .unwrap_or(config.max_matches)
        .clamp(1, config.max_matches.max(1));
    let target = ws.resolve(a.path.as_deref().unwrap_or("."))?;
    let files: Vec<WorkspacePath> = if ws.is_dir(&target)? {
        ws.files(&target, usize::MAX, |rel| match &glob {
            None => true,
            Some(m) if by_name => m.is_match(rel.rsplit('/').next().unwrap_or(rel)),
            Some(m) => m.is_match(rel),
        })?
        .files
    } else {
        vec![target]
    };
    let mut lines: Vec<String> = Vec::new();
    let mut searched = 0usize;
    let mut truncated = false;
    // Files over the size limit are skipped, and said so: a missing match must not look like
    // an absent one.
    let mut too_large: Vec<String> = Vec::new();
    'files: for file in &files {
        let bytes = match ws.read_limited(file, config.max_file_bytes) {
            Ok(bytes) => bytes,
            Err(cordis_workspace::WorkspaceError::TooLarge { .. }) => {
                too_large.push(file.to_string());
                continue;
            }
            Err(_) => continue,
        };
        if bytes.contains(&0) {
            continue;
        }
        searched += 1;
        let text = String::from_utf8_lossy(&bytes);
        for (n, line) in text.lines().enumerate() {
            if !regex.is_match(line) {
                continue;
            }
            if lines.len() == limit {
                truncated = true;
                break 'files;
            }
            let shown: String = line.chars().take(config.max_line_chars).collect();
            let cut = if shown.len() < line.len() {
                " […]"
            } else {
                ""
            };
            lines.push(format!("{file}:{}:{shown}{cut}", n + 1));
        }
    }
    let mut result = json!({
        "content": lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        "count": lines.len(),
        "files_searched": searched,
    });
    let mut notes: Vec<String> = Vec::new();
    if truncated {
        result["truncated"] = json!(true);
        notes.push(format!(
            "stopped after {limit} matches; narrow the pattern, path or glob to see the rest"
        ));
    }
    if !too_large.is_empty() {
        const SHOWN: usize = 5;
        let mut named = too_large
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if too_large.len() > SHOWN {
            named.push_str(&format!(" and {} more", too_large.len() - SHOWN));
        }
        notes.push(format!(
            "not searched, over the {}-byte limit (`maxFileBytes`): {named}",
            config.max_file_bytes
        ));
        result["skipped_too_large"] = json!(too_large.len());
    }
    if !notes.is_empty() {
        result["note"] = json!(notes.join("; "));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("root")).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::fs::write(
            tmp.path().join("outside/secret.rs"),
            "fn main() {} // secret\n",
        )
        .unwrap();
        let ws = Workspace::open(tmp.path().join("root")).unwrap();
        (tmp, ws)
    }

    fn put(ws: &Workspace, rel: &str, content: &[u8]) {
        let p = ws.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    #[test]
    fn grep_reports_file_line_matches_in_sorted_order_and_honours_gitignore() {
        let (_tmp, ws) = ws();
        put(&ws, ".gitignore", b"target/\n");
        put(&ws, "src/b.rs", b"fn b() {}\nfn main() {}\n");
        put(&ws, "src/a.rs", b"// nothing\nfn main() {}\n");
        put(&ws, "target/gen.rs", b"fn main() {}\n");
        put(&ws, "blob.bin", b"fn main\0");
        let c = SearchConfig::default();
        let r = grep(&ws, &c, json!({"pattern": r"fn \w+\(\)"})).unwrap();
        assert_eq!(
            r["content"],
            "src/a.rs:2:fn main() {}\nsrc/b.rs:1:fn b() {}\nsrc/b.rs:2:fn main() {}\n"
        );
        assert_eq!(
            (r["count"].as_u64(), r["files_searched"].as_u64()),
            (Some(3), Some(3))
        );
        let r = grep(
            &ws,
            &c,
            json!({"pattern": "MAIN", "case_insensitive": true, "glob": "b.rs"}),
        )
        .unwrap();
        assert_eq!(r["content"], "src/b.rs:2:fn main() {}\n");
        let r = grep(&ws, &c, json!({"pattern": "main", "path": "src/a.rs"})).unwrap();
        assert_eq!(r["content"], "src/a.rs:2:fn main() {}\n");
    }

    /// Regression (issue 24, low 11): a file over the size limit was skipped silently, even one
    /// named in `path`.
    #[test]
    fn files_over_the_size_limit_are_named_as_not_searched() {
        let (_tmp, ws) = ws();
        put(&ws, "big.txt", b"needle in a big file\n");
        put(&ws, "small.txt", b"x\n");
        let c = SearchConfig {
            max_file_bytes: 8,
            ..SearchConfig::default()
        };
        for args in [
            json!({"pattern": "needle"}),
            json!({"pattern": "needle", "path": "big.txt"}),
        ] {
            let r = grep(&ws, &c, args).unwrap();
            assert_eq!(r["count"], 0, "{r}");
            assert_eq!(r["skipped_too_large"], 1, "{r}");
            assert_eq!(
                r["note"],
                "not searched, over the 8-byte limit (`maxFileBytes`): big.txt"
            );
        }
    }

    #[test]
    fn grep_caps_matches_and_long_lines() {
        let (_tmp, ws) = ws();
        let many: String = (0..50).map(|i| format!("hit {i}\n")).collect();
        put(&ws, "many.txt", many.as_bytes());
        put(
            &ws,
            "wide.txt",
            format!("hit {}\n", "x".repeat(1000)).as_bytes(),
        );
        let c = SearchConfig {
            max_matches: 10,
            max_line_chars: 20,
            ..SearchConfig::default()
        };
        let r = grep(&ws, &c, json!({"pattern": "^hit"})).unwrap();
        assert_eq!(
            (r["count"].as_u64(), &r["truncated"]),
            (Some(10), &json!(true))
        );
        assert!(
            r["note"]
                .as_str()
                .unwrap()
                .starts_with("stopped after 10 matches")
        );
        let r = grep(&ws, &c, json!({"pattern": "^hit x", "max_matches": 3})).unwrap();
        assert_eq!(
            r["content"],
            format!("wide.txt:1:hit {} […]\n", "x".repeat(16))
        );
    }

    #[test]
    fn bad_patterns_and_escapes_are_errors_and_outside_files_are_never_searched() {
        let (tmp, ws) = ws();
        std::os::unix::fs::symlink(tmp.path().join("outside"), ws.root().join("out")).unwrap();
        std::os::unix::fs::symlink(
            tmp.path().join("outside/secret.rs"),
            ws.root().join("link.rs"),
        )
        .unwrap();
        let c = SearchConfig::default();
        assert!(
            grep(&ws, &c, json!({"pattern": "("}))
                .unwrap_err()
                .to_string()
                .starts_with("invalid regex")
        );
        for path in ["..", "../outside", "out", "link.rs"] {
            let e = grep(&ws, &c, json!({"pattern": "secret", "path": path})).unwrap_err();
            assert!(
                e.to_string().contains("outside the workspace root"),
                "{path}: {e}"
            );
        }
        let r = grep(&ws, &c, json!({"pattern": "secret"})).unwrap();
        assert_eq!(r["count"], 0, "{r}");
    }
}
