//! Opening a library and checking its descriptor, serialized behind one lock.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use cordis_plugin_sdk::abi::{
    ABI_MAJOR, ABI_MINOR, DESCRIPTOR_SYMBOL, DESCRIPTOR_V1_SIZE, Descriptor, FLAG_THREAD_SAFE,
    Header, HostVtable, MAGIC, Str,
};
use sha2::{Digest, Sha256};

/// Why a library could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read (for hashing).
    #[error("cannot read the library: {0}")]
    Read(String),
    /// The file's sha256 is not the pinned one.
    #[error("sha256 mismatch: the entry pins {expected}, the file is {actual}")]
    Sha256Mismatch {
        /// The pinned hash, hex.
        expected: String,
        /// The file's hash, hex.
        actual: String,
    },
    /// The dynamic loader refused the file (not a shared library, wrong architecture, missing
    /// dependencies).
    #[error("not a loadable shared library: {0}")]
    Open(String),
    /// The library does not export `cordis_plugin_descriptor`.
    #[error(
        "the library does not export `{DESCRIPTOR_SYMBOL}`; is it a cordis plugin (Rust: `cordis_plugin_sdk::export_plugin!`)?"
    )]
    MissingSymbol,
    /// `cordis_plugin_descriptor` returned null.
    #[error("`{DESCRIPTOR_SYMBOL}` returned a null descriptor")]
    NullDescriptor,
    /// The descriptor does not start with the magic number.
    #[error(
        "wrong magic {found:#018x} in the descriptor (expected {MAGIC:#018x}): not a cordis plugin descriptor"
    )]
    WrongMagic {
        /// What was there.
        found: u64,
    },
    /// The plugin was built for another major ABI version.
    #[error(
        "the plugin uses ABI {major}.{minor}; this host speaks ABI {ABI_MAJOR}.{ABI_MINOR} (major versions must match)"
    )]
    OtherMajor {
        /// The plugin's major version.
        major: u16,
        /// The plugin's minor version.
        minor: u16,
    },
    /// `struct_size` is smaller than every 1.0 field.
    #[error(
        "the descriptor's struct_size is {found} bytes, smaller than ABI {ABI_MAJOR}.0's {DESCRIPTOR_V1_SIZE}"
    )]
    TooSmall {
        /// The declared size.
        found: u32,
    },
    /// A required function pointer is null.
    #[error("the descriptor has no `{0}` function")]
    MissingFunction(&'static str),
}

/// A loaded plugin library with a checked descriptor; lives (and stays loaded) forever.
#[derive(Debug)]
pub struct Library {
    path: PathBuf,
    pub(crate) descriptor: Descriptor,
    pub(crate) host: HostVtable,
    /// Taken around every call into a library that is not thread-safe.
    call_lock: Option<Mutex<()>>,
    sha256: OnceLock<[u8; 32]>,
}

// SAFETY: the descriptor's function pointers stay valid because the library is never unloaded;
// the host table's `host_data` points at this (leaked, immutable) `Library`. Calls into a
// library that is not thread-safe are serialized by `call_lock`, so sharing `&Library` across
// threads never makes the plugin run concurrently unless its descriptor allows it.
unsafe impl Send for Library {}
// SAFETY: see `Send`; every field is read-only after `open` except the `OnceLock` and `Mutex`.
unsafe impl Sync for Library {}

impl Library {
    /// The canonical path it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The plugin's ABI version.
    pub fn abi_version(&self) -> (u16, u16) {
        (
            self.descriptor.header.abi_major,
            self.descriptor.header.abi_minor,
        )
    }

    /// True if the descriptor sets the thread-safe flag.
    pub fn thread_safe(&self) -> bool {
        self.descriptor.flags & FLAG_THREAD_SAFE != 0
    }

    /// Holds the call lock of a library that is not thread-safe.
    pub(crate) fn serialize(&self) -> Option<MutexGuard<'_, ()>> {
        self.call_lock
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Every library loaded so far, by canonical path. Its lock also serializes `dlopen` and the
/// handshake.
static LOADED: Mutex<BTreeMap<PathBuf, &'static Library>> = Mutex::new(BTreeMap::new());

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn file_sha256(path: &Path) -> Result<[u8; 32], LoadError> {
    let bytes = std::fs::read(path).map_err(|e| LoadError::Read(e.to_string()))?;
    Ok(Sha256::digest(&bytes).into())
}

fn check_pin(lib: &Library, expected: Option<&[u8; 32]>) -> Result<(), LoadError> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let actual = match lib.sha256.get() {
        Some(h) => *h,
        None => {
            let h = file_sha256(&lib.path)?;
            *lib.sha256.get_or_init(|| h)
        }
    };
    if &actual == expected {
        Ok(())
    } else {
        Err(LoadError::Sha256Mismatch {
            expected: hex(expected),
            actual: hex(&actual),
        })
    }
}

/// Loads the plugin library at `path` (a canonical path the caller has vetted) and checks its
/// descriptor, or returns the library already loaded from that path.
///
/// With `sha256`, the file must hash to it; the hash is checked before the file is opened (a
/// file swapped between the check and `dlopen` is not detected).
///
/// # Errors
/// Any [`LoadError`]. A library is leaked as soon as the host has called into it, even if the
/// handshake then fails.
pub fn open(path: &Path, sha256: Option<&[u8; 32]>) -> Result<&'static Library, LoadError> {
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(lib) = loaded.get(path) {
        check_pin(lib, sha256)?;
        return Ok(lib);
    }
    let mut hash = None;
    if let Some(expected) = sha256 {
        let actual = file_sha256(path)?;
        if &actual != expected {
            return Err(LoadError::Sha256Mismatch {
                expected: hex(expected),
                actual: hex(&actual),
            });
        }
        hash = Some(actual);
    }
    let descriptor = handshake(path)?;
    let library: &'static mut Library = Box::leak(Box::new(Library {
        path: path.to_owned(),
        descriptor,
        host: HostVtable {
            header: Header {
                magic: MAGIC,
                abi_major: ABI_MAJOR,
                abi_minor: ABI_MINOR,
                struct_size: std::mem::size_of::<HostVtable>() as u32,
            },
            log: Some(host_log),
            host_data: std::ptr::null(),
        },
        call_lock: (descriptor.flags & FLAG_THREAD_SAFE == 0).then(|| Mutex::new(())),
        sha256: hash.map(OnceLock::from).unwrap_or_default(),
    }));
    library.host.host_data = std::ptr::from_ref::<Library>(library).cast::<c_void>();
    let library: &'static Library = library;
    loaded.insert(path.to_owned(), library);
    Ok(library)
}

type DescriptorFn = extern "C" fn() -> *const Descriptor;

#[cfg(unix)]
fn dlopen(path: &Path) -> Result<libloading::os::unix::Library, LoadError> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: opening runs the library's initialisers. The caller vetted the path (allowed
    // directories, optional sha256 pin) and the host trusts the plugins it is configured with;
    // RTLD_LOCAL keeps the library's symbols out of the global namespace.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| LoadError::Open(e.to_string()))
}

#[cfg(not(unix))]
fn dlopen(path: &Path) -> Result<libloading::Library, LoadError> {
    // SAFETY: as on unix: the caller vetted the path and trusts the library's initialisers.
    unsafe { libloading::Library::new(path) }.map_err(|e| LoadError::Open(e.to_string()))
}

/// Opens the library, calls its descriptor function, and copies the checked descriptor.
fn handshake(path: &Path) -> Result<Descriptor, LoadError> {
    let lib = dlopen(path)?;
    // SAFETY: the symbol's type is fixed by the ABI (`extern "C" fn() -> *const Descriptor`);
    // a library exporting another type under this name breaks the ABI contract we rely on.
    let entry: DescriptorFn = match unsafe { lib.get::<DescriptorFn>(DESCRIPTOR_SYMBOL.as_bytes()) }
    {
        Ok(symbol) => *symbol,
        // Nothing of the library has run but its initialisers: closing it is as safe as opening.
        Err(_) => return Err(LoadError::MissingSymbol),
    };
    // From here on the library's code has run: never unload it.
    let ptr = entry();
    std::mem::forget(lib);
    read_descriptor(ptr)
}

fn read_descriptor(ptr: *const Descriptor) -> Result<Descriptor, LoadError> {
    if ptr.is_null() {
        return Err(LoadError::NullDescriptor);
    }
    // SAFETY: the ABI says the pointer refers to a static descriptor, which starts with a
    // 16-byte header; `read_unaligned` makes no alignment assumption.
    let header = unsafe { ptr.cast::<Header>().read_unaligned() };
    if header.magic != MAGIC {
        return Err(LoadError::WrongMagic {
            found: header.magic,
        });
    }
    if header.abi_major != ABI_MAJOR {
        return Err(LoadError::OtherMajor {
            major: header.abi_major,
            minor: header.abi_minor,
        });
    }
    if (header.struct_size as usize) < DESCRIPTOR_V1_SIZE {
        return Err(LoadError::TooSmall {
            found: header.struct_size,
        });
    }
    let mut out = MaybeUninit::<Descriptor>::zeroed();
    let n = (header.struct_size as usize).min(std::mem::size_of::<Descriptor>());
    // SAFETY: the plugin declares `struct_size` readable bytes at `ptr` and we copy at most that
    // many (and at most our own size) into a zeroed descriptor; every field of `Descriptor` is an
    // integer or an `Option` of a function pointer, for which all-zero bytes are valid (`None`).
    let descriptor = unsafe {
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), out.as_mut_ptr().cast::<u8>(), n);
        out.assume_init()
    };
    for (name, present) in [
        ("create", descriptor.create.is_some()),
        ("describe", descriptor.describe.is_some()),
        ("invoke", descriptor.invoke.is_some()),
        ("destroy", descriptor.destroy.is_some()),
    ] {
        if !present {
            return Err(LoadError::MissingFunction(name));
        }
    }
    Ok(descriptor)
}

/// The host table's `log`: forwards to `tracing`, tagged with the library's path.
extern "C" fn host_log(host: *const HostVtable, level: u32, message: Str) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the ABI requires `message` to be `len` readable bytes during this call.
        let text = String::from_utf8_lossy(unsafe { message.as_bytes() });
        // SAFETY: `host` is one of our leaked tables (or null); its `host_data` is the leaked
        // `Library` that owns it, set before the table was handed to the plugin.
        let path = unsafe { host.as_ref() }
            .and_then(|h| unsafe { h.host_data.cast::<Library>().as_ref() })
            .map(|l| l.path.display().to_string())
            .unwrap_or_default();
        match level {
            cordis_plugin_sdk::abi::LOG_ERROR => tracing::error!(plugin = %path, "{text}"),
            cordis_plugin_sdk::abi::LOG_WARN => tracing::warn!(plugin = %path, "{text}"),
            cordis_plugin_sdk::abi::LOG_INFO => tracing::info!(plugin = %path, "{text}"),
            _ => tracing::debug!(plugin = %path, "{text}"),
        }
    });
}
