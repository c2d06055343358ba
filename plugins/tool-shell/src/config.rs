//! Configuration of `tool-shell`.

use std::path::PathBuf;

use cordis_sandbox::SandboxMode;
use serde::Deserialize;

/// Configuration of `tool-shell`; unknown fields are rejected.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ShellConfig {
    /// The shell, run as `<shell> -c <command>`.
    pub shell: PathBuf,
    /// Environment variables passed through; a trailing `*` matches a prefix (`LC_*`).
    pub env: Vec<String>,
    /// Timeout when the call gives none.
    pub default_timeout_ms: u64,
    /// Largest timeout a call may ask for.
    pub max_timeout_ms: u64,
    /// Bytes kept of stdout and of stderr each (the head and the tail).
    pub max_output_bytes: usize,
    /// What commands may write: `read-only`, `workspace-write` (the default) or `full-access`
    /// (no sandbox).
    pub sandbox: SandboxMode,
    /// Whether commands may reach the network (default: no).
    pub network: bool,
    /// More directories commands may write in `workspace-write` (relative ones resolve against
    /// the workspace root): a build cache outside the workspace, say.
    pub writable_roots: Vec<PathBuf>,
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig {
            shell: PathBuf::from("bash"),
            env: [
                "HOME", "LANG", "LC_*", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER",
            ]
            .map(String::from)
            .to_vec(),
            default_timeout_ms: 120_000,
            max_timeout_ms: 600_000,
            max_output_bytes: 30_000,
            sandbox: SandboxMode::WorkspaceWrite,
            network: false,
            writable_roots: Vec::new(),
        }
    }
}

impl ShellConfig {
    /// The sandbox of a command run in `root` with its private temp dir `temp`.
    pub fn sandbox_for(
        &self,
        root: &std::path::Path,
        temp: &std::path::Path,
    ) -> cordis_sandbox::Sandbox {
        cordis_sandbox::Sandbox {
            mode: self.sandbox,
            network: self.network,
            workspace: root.to_path_buf(),
            writable: self.writable_roots.iter().map(|p| root.join(p)).collect(),
            temp: temp.to_path_buf(),
        }
    }

    /// What `new` lets commands do that `self` did not, one line each: a wider sandbox, the
    /// network, more writable roots or environment variables, another shell.
    pub fn widened_by(&self, new: &ShellConfig) -> Vec<String> {
        let rank = |m: SandboxMode| match m {
            SandboxMode::ReadOnly => 0,
            SandboxMode::WorkspaceWrite => 1,
            SandboxMode::FullAccess => 2,
        };
        let mut out = Vec::new();
        if rank(new.sandbox) > rank(self.sandbox) {
            out.push(format!("the sandbox {} → {}", self.sandbox, new.sandbox));
        }
        if new.network && !self.network {
            out.push("commands reach the network".to_owned());
        }
        for root in new
            .writable_roots
            .iter()
            .filter(|r| !self.writable_roots.contains(r))
        {
            out.push(format!("commands may write in {}", root.display()));
        }
        for name in new.env.iter().filter(|n| !self.env.contains(n)) {
            out.push(format!("commands get the environment variable `{name}`"));
        }
        if new.shell != self.shell {
            out.push(format!(
                "commands run with {} instead of {}",
                new.shell.display(),
                self.shell.display()
            ));
        }
        out
    }

    /// True when commands cannot write outside the workspace nor reach the network.
    pub fn is_confined(&self) -> bool {
        self.sandbox != SandboxMode::FullAccess && !self.network
    }

    /// The allowed variables of the current environment, sorted by name.
    pub fn filtered_env(&self) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let mut out: Vec<_> = std::env::vars_os()
            .filter(|(name, _)| {
                let name = name.to_string_lossy();
                self.env
                    .iter()
                    .any(|allowed| match allowed.strip_suffix('*') {
                        Some(prefix) => name.starts_with(prefix),
                        None => *allowed == name,
                    })
            })
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_reads_camel_case_keys_and_rejects_unknown_ones() {
        let c: ShellConfig = serde_json::from_value(serde_json::json!({
            "env": ["PATH"], "defaultTimeoutMs": 5, "maxOutputBytes": 10
        }))
        .unwrap();
        assert_eq!(
            (c.env.len(), c.default_timeout_ms, c.max_output_bytes),
            (1, 5, 10)
        );
        assert_eq!(c.max_timeout_ms, ShellConfig::default().max_timeout_ms);
        let e =
            serde_json::from_value::<ShellConfig>(serde_json::json!({"root": "."})).unwrap_err();
        assert!(e.to_string().contains("unknown field `root`"), "{e}");
    }
}
