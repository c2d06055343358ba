//! Calling a loaded library: instances, their calls, and what a status code means.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};

use cordis_plugin_sdk::abi::{
    STATUS_BAD_INPUT, STATUS_ERROR, STATUS_INCOMPATIBLE_HOST, STATUS_OK, STATUS_PANIC, Str, Writer,
};

use crate::library::Library;

/// A call into a plugin that did not return `OK`, with the message the plugin wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// `STATUS_ERROR`: the plugin reports a failure.
    #[error("{0}")]
    Error(String),
    /// `STATUS_PANIC`: the plugin panicked (and caught it).
    #[error("panicked: {0}")]
    Panic(String),
    /// `STATUS_BAD_INPUT`: the plugin could not read what the host passed.
    #[error("rejected its input: {0}")]
    BadInput(String),
    /// `STATUS_INCOMPATIBLE_HOST`: `create` refused this host's ABI version.
    #[error("refused this host: {0}")]
    IncompatibleHost(String),
    /// A status code the ABI does not define.
    #[error("returned unknown status {status}: {message}")]
    Unknown {
        /// The status.
        status: i32,
        /// The message written.
        message: String,
    },
    /// `OK`, but the output is not UTF-8.
    #[error("wrote output that is not UTF-8")]
    NotUtf8,
}

impl CallError {
    fn from_status(status: i32, message: Vec<u8>) -> CallError {
        let message = String::from_utf8_lossy(&message).into_owned();
        match status {
            STATUS_ERROR => CallError::Error(message),
            STATUS_PANIC => CallError::Panic(message),
            STATUS_BAD_INPUT => CallError::BadInput(message),
            STATUS_INCOMPATIBLE_HOST => CallError::IncompatibleHost(message),
            status => CallError::Unknown { status, message },
        }
    }
}

/// The writer callback: appends to the `Vec<u8>` behind `ctx`.
extern "C" fn append(ctx: *mut c_void, ptr: *const u8, len: usize) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if ctx.is_null() {
            return;
        }
        // SAFETY: `ctx` is the `&mut Vec<u8>` of the `Output` that made this writer, alive for
        // the whole call; the ABI requires `ptr` to hold `len` readable bytes.
        let (buf, bytes) = unsafe { (&mut *ctx.cast::<Vec<u8>>(), Str { ptr, len }.as_bytes()) };
        buf.extend_from_slice(bytes);
    }));
}

fn writer(buf: &mut Vec<u8>) -> Writer {
    Writer {
        ctx: std::ptr::from_mut(buf).cast::<c_void>(),
        write: Some(append),
    }
}

fn finish(status: i32, buf: Vec<u8>) -> Result<String, CallError> {
    if status == STATUS_OK {
        String::from_utf8(buf).map_err(|_| CallError::NotUtf8)
    } else {
        Err(CallError::from_status(status, buf))
    }
}

/// One plugin instance (one cordis.yml entry); destroyed on drop.
#[derive(Debug)]
pub struct Instance {
    library: &'static Library,
    ptr: *mut c_void,
}

// SAFETY: the instance pointer is only passed back to its own library, whose calls are
// serialized by the library's call lock unless its descriptor declares it thread-safe; the ABI
// requires instances to be usable from any thread.
unsafe impl Send for Instance {}
// SAFETY: see `Send`; `&Instance` only allows calls, which are serialized as above.
unsafe impl Sync for Instance {}

impl Library {
    /// Creates an instance from an entry's config, as JSON text.
    ///
    /// # Errors
    /// The plugin's status and message.
    pub fn create(&'static self, config_json: &str) -> Result<Instance, CallError> {
        let create = self.descriptor.create.expect("checked by the handshake");
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let mut buf = Vec::new();
        let status = {
            let _serial = self.serialize();
            create(
                &self.host,
                Str::new(config_json),
                &mut ptr,
                writer(&mut buf),
            )
        };
        finish(status, buf).map(|_| Instance { library: self, ptr })
    }
}

impl Instance {
    /// The library this instance belongs to.
    pub fn library(&self) -> &'static Library {
        self.library
    }

    /// The instance's tool list, as the JSON text the plugin wrote.
    ///
    /// # Errors
    /// The plugin's status and message.
    pub fn describe(&self) -> Result<String, CallError> {
        let describe = self
            .library
            .descriptor
            .describe
            .expect("checked by the handshake");
        let mut buf = Vec::new();
        let status = {
            let _serial = self.library.serialize();
            describe(self.ptr, writer(&mut buf))
        };
        finish(status, buf)
    }

    /// Runs `tool` with `args_json`; the result as the JSON text the plugin wrote.
    ///
    /// Blocks for as long as the plugin runs (and, for a library that is not thread-safe, while
    /// another call into it runs): call it from a blocking thread.
    ///
    /// # Errors
    /// The plugin's status and message.
    pub fn invoke(&self, tool: &str, args_json: &str) -> Result<String, CallError> {
        let invoke = self
            .library
            .descriptor
            .invoke
            .expect("checked by the handshake");
        let mut buf = Vec::new();
        let status = {
            let _serial = self.library.serialize();
            invoke(
                self.ptr,
                Str::new(tool),
                Str::new(args_json),
                writer(&mut buf),
            )
        };
        finish(status, buf)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let destroy = self
            .library
            .descriptor
            .destroy
            .expect("checked by the handshake");
        let _serial = self.library.serialize();
        let status = destroy(self.ptr);
        if status != STATUS_OK {
            tracing::warn!(
                plugin = %self.library.path().display(),
                status,
                "destroying a plugin instance failed"
            );
        }
    }
}
