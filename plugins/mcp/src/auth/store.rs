//! Where OAuth grants live: one file per protected resource in a private directory of the
//! user's (`$XDG_DATA_HOME/cordis/mcp-auth`, else `~/.local/share/cordis/mcp-auth`), never in
//! the workspace or a session log.
//!
//! The directory is made with mode 0700 and refused when it is a symlink, another user's, or
//! open to group or others; a grant is read without following a link or waiting on a FIFO (at
//! most [`MAX_GRANT_BYTES`]) and written whole through a fresh temporary name (mode 0600) renamed
//! over the old one, so a reader never sees half a grant and two writers never share a file.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::AuthError;

/// The largest grant file read.
pub const MAX_GRANT_BYTES: u64 = 64 << 10;

/// What an authorization server granted for one resource, and how to renew it. Its `Debug`
/// leaves out the tokens and the secret (it reaches logs through the HTTP client's).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// The MCP server's URL (the grant's key in the store).
    pub server: String,
    /// The protected resource, as the server's metadata names it (sent as `resource`).
    pub resource: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// Where tokens are renewed.
    pub token_endpoint: String,
    /// Where tokens are revoked (RFC 7009), when the authorization server offers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    /// The client id the grant was issued to.
    pub client_id: String,
    /// The client's secret, when the server registered a confidential client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The bearer token.
    pub access_token: String,
    /// The refresh token, when one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires (Unix seconds), when the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scopes granted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Scopes a server asked for later (`insufficient_scope`): the next login asks for them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wanted: Vec<String>,
    /// How the client authenticates at the token endpoint when it has a secret
    /// (`client_secret_basic`, the default, or `client_secret_post`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_auth: Option<String>,
    /// Step-up logins in a row (each after an `insufficient_scope`): bounded by
    /// [`super::MAX_STEP_UPS`]; a fresh login resets it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub step_ups: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |set: bool| if set { "<redacted>" } else { "none" };
        f.debug_struct("Grant")
            .field("server", &self.server)
            .field("resource", &self.resource)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &hidden(self.client_secret.is_some()))
            .field("access_token", &hidden(!self.access_token.is_empty()))
            .field("refresh_token", &hidden(self.refresh_token.is_some()))
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// The user's grants, one file per resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenStore {
    dir: PathBuf,
}

/// The default grants directory for an environment: `$XDG_DATA_HOME/cordis/mcp-auth`, else
/// `$HOME/.local/share/cordis/mcp-auth`.
pub fn default_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(xdg) = env("XDG_DATA_HOME").filter(|v| Path::new(v).is_absolute()) {
        return Some(PathBuf::from(xdg).join("cordis/mcp-auth"));
    }
    env("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".local/share/cordis/mcp-auth"))
}

/// The file name of the grant for the server at `server`: a hash, so any URL makes a safe name.
fn file_name(server: &str) -> String {
    let digest = Sha256::digest(server.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}.json")
}

impl TokenStore {
    /// The store in `dir` (nothing is touched until it is used).
    pub fn new(dir: impl Into<PathBuf>) -> TokenStore {
        TokenStore { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `resource`'s grant is kept.
    pub fn path_of(&self, resource: &str) -> PathBuf {
        self.dir.join(file_name(resource))
    }

    fn io(&self, e: impl std::fmt::Display) -> AuthError {
        AuthError::Store {
            path: self.dir.clone(),
            reason: e.to_string(),
        }
    }

    /// Creates the directory when missing, opens it without following a link, and checks it is
    /// this user's and closed to group and others.
    fn open_dir(&self, create: bool) -> Result<Option<OwnedFd>, AuthError> {
        match std::fs::symlink_metadata(&self.dir) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(self.io("it is a symbolic link; remove it"));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut builder = std::fs::DirBuilder::new();
                std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
                builder
                    .recursive(true)
                    .create(&self.dir)
                    .map_err(|e| self.io(e))?;
            }
            Err(e) => return Err(self.io(e)),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = rustix::fs::open(&self.dir, flags, Mode::empty()).map_err(|e| match e {
            rustix::io::Errno::LOOP => self.io("it is a symbolic link; remove it"),
            e => self.io(e),
        })?;
        let meta = rustix::fs::fstat(&dir).map_err(|e| self.io(e))?;
        let uid = rustix::process::geteuid().as_raw();
        if meta.st_uid != uid {
            return Err(self.io(format!(
                "it belongs to user {}, not to you ({uid}); remove it or choose another `oauth.tokenDir`",
                meta.st_uid
            )));
        }
        if meta.st_mode & 0o077 != 0 {
            return Err(self.io(format!(
                "it is open to other users (mode {:o}); run `chmod 700 {}`",
                meta.st_mode & 0o7777,
                self.dir.display()
            )));
        }
        Ok(Some(dir))
    }

    /// `resource`'s grant, if one is stored.
    ///
    /// # Errors
    /// An unsafe directory, a grant file that is a link, not a regular file, another user's,
    /// too large or not a grant.
    pub fn load(&self, resource: &str) -> Result<Option<Grant>, AuthError> {
        Ok(match self.read(resource)? {
            Some(bytes) => Some(
                serde_json::from_slice(&bytes).map_err(|e| AuthError::Store {
                    path: self.path_of(resource),
                    reason: format!("not a grant ({e}); run `cordis mcp logout` and log in again"),
                })?,
            ),
            None => None,
        })
    }

    /// The bytes of `resource`'s grant file, if there is one (what a watcher compares).
    ///
    /// # Errors
    /// As [`TokenStore::load`].
    pub fn read(&self, resource: &str) -> Result<Option<Vec<u8>>, AuthError> {
        let Some(dir) = self.open_dir(false)? else {
            return Ok(None);
        };
        let path = self.path_of(resource);
        let bad = |reason: String| AuthError::Store {
            path: path.clone(),
            reason,
        };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&dir, file_name(resource), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(rustix::io::Errno::LOOP) => return Err(bad("it is a symbolic link".into())),
            Err(e) => return Err(bad(e.to_string())),
        };
        let file = File::from(fd);
        let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
        if !meta.is_file() {
            return Err(bad("it is not a regular file".into()));
        }
        if meta.uid() != rustix::process::geteuid().as_raw() {
            return Err(bad("it belongs to another user".into()));
        }
        let mut bytes = Vec::new();
        file.take(MAX_GRANT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| bad(e.to_string()))?;
        if bytes.len() as u64 > MAX_GRANT_BYTES {
            return Err(bad(format!("it is larger than {MAX_GRANT_BYTES} bytes")));
        }
        Ok(Some(bytes))
    }

    /// Stores `grant` (mode 0600), replacing the resource's previous one whole.
    ///
    /// # Errors
    /// An unsafe directory or a failed write.
    pub fn save(&self, grant: &Grant) -> Result<PathBuf, AuthError> {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let dir = self.open_dir(true)?.ok_or_else(|| self.io("missing"))?;
        let name = file_name(&grant.server);
        let temp = format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        );
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&dir, &temp, flags, Mode::from_raw_mode(0o600))
            .map_err(|e| self.io(e))?;
        let mut file = File::from(fd);
        let mut text = serde_json::to_vec_pretty(grant).map_err(|e| self.io(e))?;
        text.push(b'\n');
        let written = file.write_all(&text).and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
            return Err(self.io(e));
        }
        rustix::fs::renameat(&dir, &temp, &dir, &name).map_err(|e| {
            let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
            self.io(e)
        })?;
        Ok(self.path_of(&grant.server))
    }

    /// Forgets `resource`'s grant; whether there was one.
    ///
    /// # Errors
    /// An unsafe directory or a failed removal.
    pub fn remove(&self, resource: &str) -> Result<bool, AuthError> {
        let Some(dir) = self.open_dir(false)? else {
            return Ok(false);
        };
        match rustix::fs::unlinkat(&dir, file_name(resource), AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(self.io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn grant(resource: &str) -> Grant {
        Grant {
            server: resource.into(),
            resource: resource.into(),
            issuer: "http://127.0.0.1:1/as".into(),
            token_endpoint: "http://127.0.0.1:1/as/token".into(),
            revocation_endpoint: None,
            client_id: "c".into(),
            client_secret: None,
            access_token: "at".into(),
            refresh_token: Some("rt".into()),
            expires_at: Some(10),
            scopes: vec!["mcp".into()],
            wanted: Vec::new(),
            token_auth: None,
            step_ups: 0,
        }
    }

    #[test]
    fn a_grant_is_saved_private_and_read_back_and_removed() {
        let home = tempfile::tempdir().unwrap();
        let store = TokenStore::new(home.path().join("a/mcp-auth"));
        assert_eq!(store.load("http://x/mcp").unwrap(), None);
        let path = store.save(&grant("http://x/mcp")).unwrap();
        assert_eq!(
            store.load("http://x/mcp").unwrap(),
            Some(grant("http://x/mcp"))
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(store.dir()), 0o700);
        // Nothing but the grant is left behind.
        assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1);
        assert!(store.remove("http://x/mcp").unwrap());
        assert!(!store.remove("http://x/mcp").unwrap());
        assert_eq!(store.load("http://x/mcp").unwrap(), None);
    }

    #[test]
    fn an_open_or_linked_directory_and_a_planted_link_or_fifo_are_refused() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("mcp-auth");
        let store = TokenStore::new(&dir);
        store.save(&grant("r")).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = store.load("r").unwrap_err().to_string();
        assert!(e.contains("chmod 700"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();

        // A link planted at the grant's name is not followed (to read or to write).
        let secret = home.path().join("secret");
        std::fs::write(&secret, "{}").unwrap();
        std::fs::remove_file(store.path_of("r")).unwrap();
        std::os::unix::fs::symlink(&secret, store.path_of("r")).unwrap();
        let e = store.load("r").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        store.save(&grant("r")).unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "{}");

        // A FIFO does not hang the read.
        std::fs::remove_file(store.path_of("r")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            store.path_of("r"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = store.load("r").unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_file(store.path_of("r")).unwrap();

        // A huge file is refused, read no further than the bound.
        std::fs::write(store.path_of("r"), vec![b' '; 10 << 20]).unwrap();
        let e = store.load("r").unwrap_err().to_string();
        assert!(e.contains("larger than 65536 bytes"), "{e}");

        // A directory that is a link is refused.
        let linked = home.path().join("linked");
        std::os::unix::fs::symlink(&dir, &linked).unwrap();
        let e = TokenStore::new(&linked).load("r").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }
}
