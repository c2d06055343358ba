//! Opening a library and checking its descriptor.
//!
//! A library is read once from its path (its bytes hashed and checked against the pin), copied
//! into the per-user [`Cache`], and loaded from the descriptor of that verified copy; the code
//! the loader mapped is compared with the hashed bytes before anything of the library is called
//! (beyond its initialisers). Libraries are keyed by content: the same bytes load once.
//!
//! No global lock is held across file I/O or `dlopen`: a per-content lock makes concurrent
//! loads of the same bytes wait for one another, and the table of loaded libraries is locked
//! only to look up and insert.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fs::File;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use cordis_artifact_cache::{Cache, CacheError, hex, read_library};

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
    /// The library cache cannot be used.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The code the loader mapped is not the bytes that were verified.
    #[error("the loaded code is not the verified file: {0}")]
    Unverified(String),
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
    sha256: [u8; 32],
    /// The verified copy it was loaded from, open for the life of the process: the loader knows
    /// the library by the name `/proc/self/fd/N`, which must never name another file.
    _file: File,
}

// SAFETY: the descriptor's function pointers stay valid because the library is never unloaded;
// the host table's `host_data` points at this (leaked, immutable) `Library`. Calls into a
// library that is not thread-safe are serialized by `call_lock`, so sharing `&Library` across
// threads never makes the plugin run concurrently unless its descriptor allows it.
unsafe impl Send for Library {}
// SAFETY: see `Send`; every field is read-only after `open` except the `Mutex`.
unsafe impl Sync for Library {}

impl Library {
    /// The canonical path it was first loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sha256 of its bytes.
    pub fn sha256(&self) -> [u8; 32] {
        self.sha256
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

/// Every library loaded so far, by content.
static LOADED: Mutex<BTreeMap<[u8; 32], &'static Library>> = Mutex::new(BTreeMap::new());
/// One lock per content being loaded, so the same bytes are loaded once.
static LOADING: Mutex<BTreeMap<[u8; 32], Arc<Mutex<()>>>> = Mutex::new(BTreeMap::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Loads the plugin library at `path` (a canonical path the caller has vetted) through the
/// cache of this process's environment ([`Cache::from_env`]); see [`open_in`].
///
/// # Errors
/// Any [`LoadError`].
pub fn open(path: &Path, sha256: Option<&[u8; 32]>) -> Result<&'static Library, LoadError> {
    open_in(&Cache::from_env()?, path, sha256)
}

/// Loads the plugin library at `path` (a canonical path the caller has vetted) and checks its
/// descriptor, or returns the library already loaded with the same bytes.
///
/// The file is read once (without following a symlink or blocking on a FIFO); with `sha256`,
/// those bytes must hash to it. They are copied into `cache`, and the library is loaded from
/// the descriptor of the verified copy.
///
/// # Errors
/// Any [`LoadError`]. A library is leaked as soon as the host has called into it, even if the
/// handshake then fails.
pub fn open_in(
    cache: &Cache,
    path: &Path,
    sha256: Option<&[u8; 32]>,
) -> Result<&'static Library, LoadError> {
    let (bytes, meta) = read_library(path).map_err(|e| LoadError::Read(e.to_string()))?;
    warn_if_shared(path, &meta);
    let hash: [u8; 32] = Sha256::digest(&bytes).into();
    if let Some(expected) = sha256
        && expected != &hash
    {
        return Err(LoadError::Sha256Mismatch {
            expected: hex(expected),
            actual: hex(&hash),
        });
    }
    if let Some(lib) = lock(&LOADED).get(&hash) {
        return Ok(lib);
    }
    let gate = lock(&LOADING).entry(hash).or_default().clone();
    let _loading = lock(&gate);
    if let Some(lib) = lock(&LOADED).get(&hash) {
        return Ok(lib);
    }
    let result = load(cache, path, &bytes, hash);
    // Published before the gate goes, while it is still held: a caller arriving in between
    // must find the library, not a fresh gate and a second load of the same bytes.
    if let Ok(library) = result {
        lock(&LOADED).insert(hash, library);
    }
    lock(&LOADING).remove(&hash);
    result
}

fn load(
    cache: &Cache,
    path: &Path,
    bytes: &[u8],
    hash: [u8; 32],
) -> Result<&'static Library, LoadError> {
    let file_name = path
        .file_name()
        .map_or_else(|| "library".into(), |n| n.to_string_lossy().into_owned());
    let file = cache.materialize(bytes, &hash, &file_name)?;
    let (descriptor, file) = handshake(file, bytes)?;
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
        sha256: hash,
        _file: file,
    }));
    library.host.host_data = std::ptr::from_ref::<Library>(library).cast::<c_void>();
    Ok(library)
}

/// Warns (once per path) when others can replace a library: it or its directory is
/// world-writable.
fn warn_if_shared(path: &Path, meta: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    static WARNED: Mutex<std::collections::BTreeSet<PathBuf>> =
        Mutex::new(std::collections::BTreeSet::new());
    let dir_shared = path
        .parent()
        .and_then(|d| std::fs::metadata(d).ok())
        .is_some_and(|m| m.mode() & 0o002 != 0);
    let what = match (meta.mode() & 0o002 != 0, dir_shared) {
        (true, _) => "the library file is world-writable",
        (false, true) => "its directory is world-writable",
        (false, false) => return,
    };
    if lock(&WARNED).insert(path.to_owned()) {
        tracing::warn!(
            plugin = %path.display(),
            "{what}: any user on this machine can replace the code this host loads (pin it with sha256, or fix the permissions)"
        );
    }
}

type DescriptorFn = extern "C" fn() -> *const Descriptor;

/// The name under which the loader opens `file` itself: the descriptor, not a path anyone
/// could swap.
fn fd_path(file: &File) -> PathBuf {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    if cfg!(target_os = "linux") || cfg!(target_os = "android") {
        PathBuf::from(format!("/proc/self/fd/{fd}"))
    } else {
        PathBuf::from(format!("/dev/fd/{fd}"))
    }
}

/// Opens the library from the verified copy's descriptor, checks that the code mapped is those
/// bytes, calls its descriptor function, and copies the checked descriptor. Hands the file back
/// to be kept open for good (see [`Library`]).
fn handshake(file: File, bytes: &[u8]) -> Result<(Descriptor, File), LoadError> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: opening runs the library's initialisers. The caller vetted the path (allowed
    // directories, optional sha256 pin), these are the bytes it hashed (the loader opens our
    // own descriptor), and the host trusts the plugins it is configured with; RTLD_LOCAL keeps
    // the library's symbols out of the global namespace.
    let lib = unsafe { Library::open(Some(fd_path(&file)), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| LoadError::Open(e.to_string()))?;
    // The loader now knows this object (also) as `/proc/self/fd/N`; if that number were reused
    // for another file, a later `dlopen` of the name would return this object. So the
    // descriptor stays open for good from here on, whatever happens.
    let file = std::mem::ManuallyDrop::new(file);
    // SAFETY: the symbol's type is fixed by the ABI (`extern "C" fn() -> *const Descriptor`);
    // a library exporting another type under this name breaks the ABI contract we rely on.
    let entry: DescriptorFn = match unsafe { lib.get::<DescriptorFn>(DESCRIPTOR_SYMBOL.as_bytes()) }
    {
        Ok(symbol) => *symbol,
        // Nothing of the library has run but its initialisers: closing it is as safe as opening.
        Err(_) => return Err(LoadError::MissingSymbol),
    };
    if let Err(e) = crate::mapped::verify(entry as *const c_void, bytes) {
        std::mem::forget(lib);
        return Err(LoadError::Unverified(e));
    }
    // From here on the library's code has run: never unload it.
    let ptr = entry();
    std::mem::forget(lib);
    let descriptor = read_descriptor(ptr)?;
    Ok((descriptor, std::mem::ManuallyDrop::into_inner(file)))
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
