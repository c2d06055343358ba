//! The C ABI between the host and a plugin, version [`ABI_MAJOR`].[`ABI_MINOR`].
//!
//! Mirrors `include/cordis_plugin.h`; `docs/plugin-abi.md` is the specification. Every struct is
//! `#[repr(C)]` and starts with (or is) plain data; function pointers are `Option`s so a null
//! pointer in a short or hostile descriptor is a value, not undefined behaviour.
//!
//! # Compatibility
//! A reader accepts an equal major version and any minor version, and reads only the fields that
//! lie inside the other side's `struct_size`. Minor versions only append fields.

use std::ffi::c_void;

/// The first field of [`Descriptor`] and [`HostVtable`]: `"CORDPLUG"` in ASCII, read as a
/// little-endian `u64`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"CORDPLUG");
/// Incompatible changes bump this; the host refuses any other major version.
pub const ABI_MAJOR: u16 = 1;
/// Appended fields bump this; readers accept any minor version.
pub const ABI_MINOR: u16 = 0;
/// The exported symbol: `extern "C" fn() -> *const Descriptor`.
pub const DESCRIPTOR_SYMBOL: &str = "cordis_plugin_descriptor";

/// The call succeeded; the writer received the output (JSON for `describe` and `invoke`).
pub const STATUS_OK: i32 = 0;
/// The call failed; the writer received a UTF-8 message.
pub const STATUS_ERROR: i32 = 1;
/// The plugin panicked (or hit the C equivalent); the writer received the panic message.
pub const STATUS_PANIC: i32 = 2;
/// The host passed something the plugin cannot read (bad JSON, unknown tool name).
pub const STATUS_BAD_INPUT: i32 = 3;
/// `create` refused the host's ABI version (see [`HostVtable`]).
pub const STATUS_INCOMPATIBLE_HOST: i32 = 4;

/// Descriptor flag: `invoke` may run concurrently on one instance (and across instances); without
/// it the host makes at most one call into the library at a time.
pub const FLAG_THREAD_SAFE: u64 = 1;

/// The version header both sides' tables start with.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`ABI_MAJOR`] of the side that filled the table.
    pub abi_major: u16,
    /// [`ABI_MINOR`] of the side that filled the table.
    pub abi_minor: u16,
    /// `size_of` the whole table as that side knows it.
    pub struct_size: u32,
}

/// A borrowed UTF-8 string (not NUL-terminated), valid for the duration of the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Str {
    /// First byte; may be null when `len` is 0.
    pub ptr: *const u8,
    /// Length in bytes.
    pub len: usize,
}

impl Str {
    /// Borrows `s` for one call.
    pub fn new(s: &str) -> Str {
        Str {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// The bytes.
    ///
    /// # Safety
    /// `ptr` must point at `len` readable bytes that live for `'a` (or `len` must be 0).
    pub unsafe fn as_bytes<'a>(self) -> &'a [u8] {
        if self.len == 0 || self.ptr.is_null() {
            return &[];
        }
        // SAFETY: the caller guarantees `ptr..ptr+len` is readable for `'a`; null and empty
        // were handled above.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Appends `len` bytes at `ptr` to the output identified by `ctx`. May be called any number of
/// times during one call, never after it returns.
pub type WriteFn = extern "C" fn(ctx: *mut c_void, ptr: *const u8, len: usize);

/// Where a call's output (or error message) goes: the host owns the buffer, so no allocation
/// crosses the boundary.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Writer {
    /// Opaque to the plugin; passed back to `write`.
    pub ctx: *mut c_void,
    /// Copies bytes into the host's buffer.
    pub write: Option<WriteFn>,
}

/// Log levels of [`HostVtable::log`].
pub const LOG_ERROR: u32 = 1;
/// Warning.
pub const LOG_WARN: u32 = 2;
/// Information.
pub const LOG_INFO: u32 = 3;
/// Debugging detail.
pub const LOG_DEBUG: u32 = 4;

/// What the host offers a plugin; passed to `create`, valid for the life of the process.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HostVtable {
    /// The host's version; a plugin may refuse an older host with
    /// [`STATUS_INCOMPATIBLE_HOST`].
    pub header: Header,
    /// Logs a UTF-8 message through the host's logger, tagged with the library.
    pub log: Option<extern "C" fn(host: *const HostVtable, level: u32, message: Str)>,
    /// Opaque host data for `log`.
    pub host_data: *const c_void,
}

/// `create(host, config_json, instance_out, err)`: makes an instance from the entry's config
/// (JSON, `null` when absent). On failure writes a message to `err`.
pub type CreateFn = extern "C" fn(
    host: *const HostVtable,
    config: Str,
    instance: *mut *mut c_void,
    err: Writer,
) -> i32;
/// `describe(instance, out)`: writes `{"tools": [{"name", "description", "parameters",
/// "timeout_ms"?}]}`.
pub type DescribeFn = extern "C" fn(instance: *mut c_void, out: Writer) -> i32;
/// `invoke(instance, tool, args_json, out)`: runs one call; writes the result JSON, or a message.
pub type InvokeFn = extern "C" fn(instance: *mut c_void, tool: Str, args: Str, out: Writer) -> i32;
/// `destroy(instance)`: frees an instance; called once, after every call on it has returned.
pub type DestroyFn = extern "C" fn(instance: *mut c_void) -> i32;

/// What `cordis_plugin_descriptor` returns: a static table, valid forever.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Descriptor {
    /// The plugin's ABI version.
    pub header: Header,
    /// Bit set of `FLAG_*`.
    pub flags: u64,
    /// See [`CreateFn`].
    pub create: Option<CreateFn>,
    /// See [`DescribeFn`].
    pub describe: Option<DescribeFn>,
    /// See [`InvokeFn`].
    pub invoke: Option<InvokeFn>,
    /// See [`DestroyFn`].
    pub destroy: Option<DestroyFn>,
}

/// The smallest `struct_size` of a 1.x descriptor: every 1.0 field.
pub const DESCRIPTOR_V1_SIZE: usize = std::mem::size_of::<Descriptor>();
/// The smallest `struct_size` of a 1.x host table: every 1.0 field.
pub const HOST_V1_SIZE: usize = std::mem::size_of::<HostVtable>();

// The header is 16 bytes and the layout matches `cordis_plugin.h` on 64-bit targets.
const _: () = assert!(std::mem::size_of::<Header>() == 16);
#[cfg(target_pointer_width = "64")]
const _: () = assert!(DESCRIPTOR_V1_SIZE == 56 && HOST_V1_SIZE == 32);
