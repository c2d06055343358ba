//! The file tools' reads and writes through the editor, when it advertises them
//! (`clientCapabilities.fs`): `fs/write_text_file` puts the agent's writes into the editor's
//! buffers (so its review UI shows them and unsaved edits are not lost), `fs/read_text_file`
//! reads what the user sees, unsaved edits included. The workspace check happens first, in the
//! tools, exactly as without an editor.
//!
//! # Stale buffers
//! A command (or any tool that may change files) writes the disk, not the editor's buffers, and
//! an editor reloads a changed file when it notices. So a file whose disk copy changed after the
//! latest such call began is read from disk: the disk is newer than any buffer could be.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use cordis_workspace::{FileRoute, RouteFuture};
use serde_json::json;

use super::rpc::Connection;

/// How much earlier than the latest file-changing call a disk change still counts as after it.
const MTIME_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

/// What the editor said it does with files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EditorFs {
    /// `fs/read_text_file`.
    pub read: bool,
    /// `fs/write_text_file`.
    pub write: bool,
}

impl EditorFs {
    /// From `clientCapabilities` (absent or not `true`: not offered).
    pub fn of(capabilities: &serde_json::Value) -> Self {
        EditorFs {
            read: capabilities["fs"]["readTextFile"] == json!(true),
            write: capabilities["fs"]["writeTextFile"] == json!(true),
        }
    }

    /// True when the editor takes reads or writes.
    pub fn any(self) -> bool {
        self.read || self.write
    }
}

/// The editor of one session as the file tools' [`FileRoute`].
pub struct EditorFiles {
    /// The connection to the editor.
    pub connection: Connection,
    /// The session the files belong to.
    pub session_id: String,
    /// What the editor does.
    pub fs: EditorFs,
    /// When the latest call of a tool that may change files began (see the module docs).
    pub changing_since: Arc<Mutex<Option<SystemTime>>>,
}

impl FileRoute for EditorFiles {
    fn writes(&self) -> bool {
        self.fs.write
    }

    fn read_text(&self, path: PathBuf) -> RouteFuture<Option<String>> {
        if !self.fs.read {
            return Box::pin(async { Ok(None) });
        }
        let since = *cordis_runtime::lock(&self.changing_since);
        let connection = self.connection.clone();
        let session_id = self.session_id.clone();
        Box::pin(async move {
            // The margin: file times come from a clock that lags the one `since` was read
            // from by up to a tick; reading the disk copy of a file saved just before is harmless.
            if let Some(since) = since.map(|s| s - MTIME_MARGIN) {
                let modified = tokio::fs::metadata(&path)
                    .await
                    .and_then(|m| m.modified())
                    .ok();
                if modified.is_some_and(|m| m >= since) {
                    return Ok(None);
                }
            }
            let answer = connection
                .request(
                    "fs/read_text_file",
                    json!({"sessionId": session_id, "path": path}),
                )
                .await
                .map_err(|e| e.to_string())?;
            match answer["content"].as_str() {
                Some(text) => Ok(Some(text.to_owned())),
                None => Err(format!("its answer has no text content: {answer}")),
            }
        })
    }

    fn write_text(&self, path: PathBuf, content: String) -> RouteFuture<()> {
        let answer = self.connection.request(
            "fs/write_text_file",
            json!({"sessionId": self.session_id, "path": path, "content": content}),
        );
        Box::pin(async move { answer.await.map(drop).map_err(|e| e.to_string()) })
    }
}
