//! `/init`: a starter `AGENTS.md` in the workspace root, from what the workspace shows (its
//! top-level files, a `Cargo.toml` or `package.json` name, the test command when it is
//! obvious). Asked like any write (the text shown, y/N); piped, it is only shown unless
//! `--yes`; never over an existing file.

use std::path::{Path, PathBuf};

use super::*;

/// At most this many top-level names are listed.
const LISTED: usize = 40;

impl Conversation<'_> {
    /// `/init`: shows the starter file, asks (or takes `--yes`), writes it.
    pub(super) async fn init(&mut self, io: &mut Io<'_>) -> anyhow::Result<()> {
        let root = self.root.get::<cordis_workspace::Workspace>().map_or_else(
            || std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            |ws| ws.root().to_path_buf(),
        );
        let at = root.join("AGENTS.md");
        let looked = root.clone();
        let (exists, text) = tokio::task::spawn_blocking(move || {
            (looked.join("AGENTS.md").exists(), starter(&looked))
        })
        .await?;
        if exists {
            writeln!(
                io.err,
                "cordis: {} exists; /init writes only a new one (edit that one instead)",
                at.display()
            )?;
            return Ok(());
        }
        let shown = format!(
            "cordis: /init would write {}:\n{}",
            at.display(),
            safe_lines(&text)
        );
        let write = if self.args.yes {
            write!(io.err, "{shown}")?;
            true
        } else if self.interactive {
            self.ask_write(format!("{shown}cordis: write it? [y]es, [N]o "), io)
                .await?
        } else {
            write!(io.err, "{shown}")?;
            writeln!(
                io.err,
                "cordis: not written: without a terminal /init only shows it (--yes writes it)"
            )?;
            false
        };
        if !write {
            return Ok(());
        }
        let target = at.clone();
        // `create_new`: a file made meanwhile is not overwritten.
        let wrote = tokio::task::spawn_blocking(move || {
            use std::io::Write as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&target)
                .and_then(|mut f| f.write_all(text.as_bytes()))
        })
        .await?;
        match wrote {
            Ok(()) => writeln!(io.err, "cordis: wrote {}", at.display())?,
            Err(e) => writeln!(io.err, "cordis: cannot write {}: {e}", at.display())?,
        }
        Ok(())
    }

    /// Asks `text` and reads a yes or a no.
    async fn ask_write(&mut self, text: String, io: &mut Io<'_>) -> std::io::Result<bool> {
        let (question, shown) = match &mut self.input {
            Input::Terminal(terminal) => (Some(terminal.ask(text.clone())), None),
            Input::Lines(_) => {
                write!(io.err, "{text}")?;
                io.err.flush()?;
                (None, Some(std::time::Instant::now()))
            }
        };
        let yes = match self.await_reply(question, shown, &text, io).await? {
            Reply::Terminal(Event::Answer { answer, .. }) => {
                matches!(answer, Answer::Allow | Answer::AllowAlways)
            }
            Reply::Line(line) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
            Reply::Terminal(_) | Reply::Interrupted | Reply::Eof => false,
        };
        if !yes {
            writeln!(io.err, "cordis: not written")?;
        }
        Ok(yes)
    }
}

/// The starter text for the workspace at `root` (blocking: it reads the directory).
pub(super) fn starter(root: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let dir = e.file_type().is_ok_and(|t| t.is_dir());
            (!name.starts_with('.')).then(|| if dir { format!("{name}/") } else { name })
        })
        .collect();
    names.sort();
    let read = |name: &str| std::fs::read_to_string(root.join(name)).ok();
    let mut project = Vec::new();
    let mut commands = Vec::new();
    if let Some(cargo) = read("Cargo.toml") {
        match cargo_name(&cargo) {
            Some(name) => project.push(format!("- A Rust crate, `{name}` (Cargo.toml).")),
            None => project.push("- A Rust workspace (Cargo.toml).".to_owned()),
        }
        commands.push("- Build: `cargo build`".to_owned());
        commands.push("- Test: `cargo test`".to_owned());
    }
    if let Some(json) =
        read("package.json").and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    {
        match json["name"].as_str() {
            Some(name) => project.push(format!("- A JavaScript package, `{name}` (package.json).")),
            None => project.push("- A JavaScript package (package.json).".to_owned()),
        }
        if json["scripts"]["test"].is_string() {
            commands.push("- Test: `npm test`".to_owned());
        }
    }
    if read("go.mod").is_some() {
        project.push("- A Go module (go.mod).".to_owned());
        commands.push("- Test: `go test ./...`".to_owned());
    }
    if read("pyproject.toml").is_some() {
        project.push("- A Python project (pyproject.toml).".to_owned());
    }
    if commands.is_empty()
        && read("Makefile").is_some_and(|m| m.lines().any(|l| l.starts_with("test:")))
    {
        commands.push("- Test: `make test`".to_owned());
    }
    let mut text = String::from(
        "# AGENTS.md\n\nInstructions for coding agents working in this repository.\n\n## Project\n\n",
    );
    if project.is_empty() {
        project.push("- (What this project is, in a sentence or two.)".to_owned());
    }
    text.push_str(&(project.join("\n") + "\n"));
    let mut listed: Vec<String> = names
        .iter()
        .take(LISTED)
        .map(|n| format!("`{n}`"))
        .collect();
    if names.len() > LISTED {
        listed.push(format!("and {} more", names.len() - LISTED));
    }
    if !listed.is_empty() {
        text.push_str(&format!("- Top level: {}.\n", listed.join(", ")));
    }
    text.push_str("\n## Commands\n\n");
    if commands.is_empty() {
        commands.push("- Test: (the command that runs the tests.)".to_owned());
    }
    text.push_str(&(commands.join("\n") + "\n"));
    text.push_str(
        "\n## Conventions\n\n- (Code style, review rules, and what an agent must not do here.)\n",
    );
    text
}

/// The `name` of `[package]` in a `Cargo.toml`.
fn cargo_name(cargo: &str) -> Option<String> {
    let mut in_package = false;
    for line in cargo.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "name"
        {
            return Some(value.trim().trim_matches('"').to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_crate_is_named_and_tested_with_cargo() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[workspace]\nname = \"no\"\n[package]\nname = \"demo\"\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join(".hidden"), "").unwrap();
        let text = super::starter(dir.path());
        assert!(text.contains("A Rust crate, `demo`"), "{text}");
        assert!(text.contains("- Test: `cargo test`"), "{text}");
        assert!(
            text.contains("- Top level: `Cargo.toml`, `src/`."),
            "{text}"
        );
    }
}
