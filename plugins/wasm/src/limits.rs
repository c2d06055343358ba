//! Per-call and per-instance limits of a guest.
//!
//! - **Fuel** (deterministic): every call starts with [`Limits::fuel`] units; running out stops
//!   the call at the same instruction on every machine. The store yields to the async runtime
//!   every [`YIELD_INTERVAL`] units, so a spinning guest never holds a tokio thread (exact replay
//!   runs on a current-thread runtime).
//! - **Deadline** (wall clock, a backstop): the tool's timeout, as a number of engine epochs
//!   ([`crate::EPOCH_TICK`] each); it stops guests that block in a granted host call.
//! - **Memory, tables, instances**: a [`wasmtime::ResourceLimiter`] that refuses growth past the
//!   limit with a trap naming it.

use serde::{Deserialize, Serialize};

/// Fuel between two yields of a running call to the async runtime.
pub const YIELD_INTERVAL: u64 = 100_000;
/// Fuel per call when the entry sets none: about a tenth of a second of compiled code.
pub const DEFAULT_FUEL: u64 = 100_000_000;
/// Linear memory per instance when the entry sets none, in MiB.
pub const DEFAULT_MEMORY_MIB: u64 = 64;
/// Table elements per table.
pub const TABLE_ELEMENTS: usize = 100_000;
/// Core instances, tables and memories per store (a component is several core instances: a
/// componentize-py guest is 33 of them, so 32 refused every Python guest).
pub const INSTANCES: usize = 128;

/// The limits of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Fuel per call (and for `init` and `describe`).
    pub fuel: u64,
    /// Linear memory per instance, in bytes.
    pub memory_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: DEFAULT_FUEL,
            memory_bytes: DEFAULT_MEMORY_MIB << 20,
        }
    }
}

/// The store's resource limiter: refuses growth past the limits and remembers why, so a trap
/// reads "memory limit of 64 MiB" instead of a bare grow failure.
#[derive(Debug)]
pub(crate) struct Limiter {
    memory_bytes: usize,
    /// The refusal that trapped the running call, if any.
    pub(crate) hit: Option<String>,
}

impl Limiter {
    pub(crate) fn new(limits: &Limits) -> Limiter {
        Limiter {
            memory_bytes: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
            hit: None,
        }
    }
}

fn mib(bytes: usize) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            let why = format!(
                "memory limit of {} reached (the guest asked to grow from {} to {})",
                mib(self.memory_bytes),
                mib(current),
                mib(desired)
            );
            self.hit = Some(why.clone());
            // An error traps the guest at its `memory.grow` (instead of returning -1 to a guest
            // that may ignore it), so the call stops with this reason.
            return Err(wasmtime::format_err!("{why}"));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > TABLE_ELEMENTS {
            let why = format!("table limit of {TABLE_ELEMENTS} elements reached");
            self.hit = Some(why.clone());
            return Err(wasmtime::format_err!("{why}"));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        INSTANCES
    }

    fn tables(&self) -> usize {
        INSTANCES
    }

    fn memories(&self) -> usize {
        INSTANCES
    }
}
