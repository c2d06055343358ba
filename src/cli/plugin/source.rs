//! Where a plugin file comes from: a local path (read once, never through a symlink, never
//! waiting on a FIFO) or an HTTPS URL (downloaded with the workspace's HTTP client), both
//! bounded by [`MAX_PLUGIN_BYTES`]; what kind of plugin the bytes are; their sha256.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use cordis_host::digest::sha256_hex;

/// The largest plugin file `cordis plugin` reads or downloads: 256 MiB.
pub const MAX_PLUGIN_BYTES: u64 = 256 * 1024 * 1024;

/// How long a download may take in all.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a plugin file cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The path is a symlink: the file it points to is what should be named.
    #[error("{0} is a symbolic link; name the file it points to")]
    Symlink(PathBuf),
    /// Not a regular file (a directory, a FIFO, a device, a socket).
    #[error("{path} is a {what}, not a regular file")]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// The file cannot be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Larger than [`MAX_PLUGIN_BYTES`].
    #[error(
        "{0} is larger than {MAX_PLUGIN_BYTES} bytes (256 MiB), the most `cordis plugin` takes"
    )]
    TooLarge(String),
    /// `http://` (or another scheme than `https://`).
    #[error(
        "{0}: only https:// URLs are downloaded (a plugin fetched over plain HTTP could be anyone's)"
    )]
    Insecure(String),
    /// The URL does not parse.
    #[error("{url} is not a URL: {why}")]
    BadUrl {
        /// The text given.
        url: String,
        /// Why.
        why: String,
    },
    /// The download failed.
    #[error("downloading {url} failed: {why}")]
    Download {
        /// The URL.
        url: String,
        /// Why (the client's error, with its causes, or the HTTP status).
        why: String,
    },
    /// Neither a WebAssembly component nor a shared library.
    #[error("{0} is neither a WebAssembly component nor a shared library (ELF, Mach-O or PE)")]
    Unknown(String),
    /// A core WebAssembly module, not a component.
    #[error(
        "{0} is a core WebAssembly module, not a component; make it one with `wasm-tools component new` (see docs/wasm-plugins.md)"
    )]
    CoreModule(String),
}

/// What kind of plugin a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A WebAssembly component (`.wasm`).
    Wasm,
    /// A shared library; the extension its format goes by (`.so`, `.dylib`, `.dll`).
    Dylib(&'static str),
}

impl Kind {
    /// The kind of `bytes` (`what` names them in errors).
    ///
    /// # Errors
    /// [`SourceError::CoreModule`] or [`SourceError::Unknown`].
    pub fn of(bytes: &[u8], what: &str) -> Result<Kind, SourceError> {
        const MACH_O: [[u8; 4]; 5] = [
            [0xfe, 0xed, 0xfa, 0xce],
            [0xfe, 0xed, 0xfa, 0xcf],
            [0xce, 0xfa, 0xed, 0xfe],
            [0xcf, 0xfa, 0xed, 0xfe],
            [0xca, 0xfe, 0xba, 0xbe],
        ];
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => Err(SourceError::CoreModule(what.into())),
            Some([0, b'a', b's', b'm', ..]) => Ok(Kind::Wasm),
            Some([0x7f, b'E', b'L', b'F', ..]) => Ok(Kind::Dylib(".so")),
            Some([a, b, c, d, ..]) if MACH_O.contains(&[*a, *b, *c, *d]) => {
                Ok(Kind::Dylib(".dylib"))
            }
            Some([b'M', b'Z', ..]) => Ok(Kind::Dylib(".dll")),
            _ => Err(SourceError::Unknown(what.into())),
        }
    }

    /// The extension its files must have for the host to load them as this kind.
    pub fn extension(self) -> &'static str {
        match self {
            Kind::Wasm => ".wasm",
            Kind::Dylib(ext) => ext,
        }
    }
}

/// What the file type of `meta` is, for a message.
fn file_type(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() || t.is_char_device() {
        "device"
    } else if t.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

/// Reads `path`, a regular file of at most [`MAX_PLUGIN_BYTES`]: opened without waiting (a
/// FIFO never blocks) and, unless `follow`, without following a symlink; what is read is what
/// the descriptor's own metadata says is a regular file.
///
/// # Errors
/// A [`SourceError`] naming the path.
pub fn read_file(path: &Path, follow: bool) -> Result<Vec<u8>, SourceError> {
    let io = |source| SourceError::Io {
        path: path.to_owned(),
        source,
    };
    let mut flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::CLOEXEC;
    if !follow {
        flags |= rustix::fs::OFlags::NOFOLLOW;
        if let Ok(meta) = std::fs::symlink_metadata(path)
            && meta.file_type().is_symlink()
        {
            return Err(SourceError::Symlink(path.to_owned()));
        }
    }
    // open(2) flags are a C int; these bits fit.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
        .map_err(|e| {
            // O_NOFOLLOW on a symlink: ELOOP.
            if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                SourceError::Symlink(path.to_owned())
            } else {
                io(e)
            }
        })?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(SourceError::NotRegular {
            path: path.to_owned(),
            what: file_type(&meta),
        });
    }
    if meta.len() > MAX_PLUGIN_BYTES {
        return Err(SourceError::TooLarge(path.display().to_string()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PLUGIN_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_PLUGIN_BYTES {
        return Err(SourceError::TooLarge(path.display().to_string()));
    }
    Ok(bytes)
}

/// A plugin source as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A local file.
    Path(PathBuf),
    /// An `https://` URL.
    Url(reqwest::Url),
}

impl Source {
    /// `text` as a source: `https://…` a URL, another `scheme://` refused, anything else a path.
    ///
    /// # Errors
    /// [`SourceError::Insecure`] or [`SourceError::BadUrl`].
    pub fn parse(text: &str) -> Result<Source, SourceError> {
        let Some((scheme, _)) = text.split_once("://") else {
            return Ok(Source::Path(PathBuf::from(text)));
        };
        if !scheme.eq_ignore_ascii_case("https") {
            return Err(SourceError::Insecure(text.to_owned()));
        }
        let url = reqwest::Url::parse(text).map_err(|e| SourceError::BadUrl {
            url: text.to_owned(),
            why: e.to_string(),
        })?;
        Ok(Source::Url(url))
    }

    /// The file name the source suggests (its last path segment).
    pub fn file_name(&self) -> String {
        match self {
            Source::Path(p) => p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            Source::Url(u) => u
                .path_segments()
                .and_then(|mut s| s.next_back().map(str::to_owned))
                .unwrap_or_default(),
        }
    }
}

/// Downloads `url` over HTTPS (redirects only to HTTPS, at most 5), at most
/// [`MAX_PLUGIN_BYTES`], on a runtime of its own (the caller is not async).
///
/// # Errors
/// [`SourceError::Download`] or [`SourceError::TooLarge`].
pub fn download(url: &reqwest::Url) -> Result<Vec<u8>, SourceError> {
    let failed = |why: String| SourceError::Download {
        url: url.to_string(),
        why,
    };
    let chain = |e: &dyn std::error::Error| {
        let mut text = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            text.push_str(": ");
            text.push_str(&c.to_string());
            cause = c.source();
        }
        text
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(e.to_string()))?;
    rt.block_on(async {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            if attempt.url().scheme() != "https" {
                attempt.error("a redirect leaves https")
            } else if attempt.previous().len() > 5 {
                attempt.error("more than 5 redirects")
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .https_only(true)
            .redirect(redirects)
            .connect_timeout(Duration::from_secs(30))
            .timeout(DOWNLOAD_TIMEOUT)
            .user_agent(concat!("cordis/", env!("CORDIS_VERSION")))
            .build()
            .map_err(|e| failed(chain(&e)))?;
        let mut response = client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| failed(chain(&e)))?;
        if !response.status().is_success() {
            return Err(failed(format!("the server answered {}", response.status())));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_PLUGIN_BYTES)
        {
            return Err(SourceError::TooLarge(url.to_string()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| failed(chain(&e)))? {
            if (body.len() + chunk.len()) as u64 > MAX_PLUGIN_BYTES {
                return Err(SourceError::TooLarge(url.to_string()));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_by_their_magic_and_a_core_module_is_refused() {
        assert_eq!(Kind::of(b"\0asm\x0d\0\x01\0rest", "x").unwrap(), Kind::Wasm);
        assert_eq!(
            Kind::of(b"\x7fELF\x02\x01\x01\0", "x").unwrap(),
            Kind::Dylib(".so")
        );
        assert!(matches!(
            Kind::of(b"\0asm\x01\0\0\0", "x"),
            Err(SourceError::CoreModule(_))
        ));
        assert!(matches!(
            Kind::of(b"#!/bin/sh\n", "x"),
            Err(SourceError::Unknown(_))
        ));
    }

    #[test]
    fn only_https_urls_are_sources() {
        assert!(matches!(
            Source::parse("http://example.org/a.wasm"),
            Err(SourceError::Insecure(_))
        ));
        assert!(matches!(
            Source::parse("ftp://example.org/a.wasm"),
            Err(SourceError::Insecure(_))
        ));
        let url = Source::parse("https://example.org/x/a.wasm?v=1").unwrap();
        assert_eq!(url.file_name(), "a.wasm");
        assert_eq!(
            Source::parse("./p/a.wasm").unwrap(),
            Source::Path("./p/a.wasm".into())
        );
    }

    #[test]
    fn the_pin_is_the_lowercase_hex_sha256() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
