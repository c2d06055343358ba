//! How far one run may go.

use std::time::Duration;

use crate::CodeRuntimeError;

/// The limits of one run; each one has its own failure kind and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes the engine may allocate (its heap, not the host's); exceeding it fails the run with
    /// `memory`. At least 1 MiB (an empty engine needs a few hundred KiB).
    pub memory_bytes: usize,
    /// Time the engine may spend executing the program; time spent waiting on tool calls does
    /// not count. Exhausting it fails the run with `timeout`.
    pub cpu_time: Duration,
    /// Time from start to outcome, waiting included; reaching it fails the run with `timeout`.
    pub wall_clock: Duration,
    /// Bytes of output: every captured log line's text plus the completion's JSON; exceeding it
    /// fails the run with `output-limit`. At least 4.
    pub output_bytes: usize,
    /// Read-only sub-calls that may be in flight at once; at least 1.
    pub max_parallel_sub_calls: usize,
    /// Tool calls one run may make in all; the next one fails the run with `sub-call-limit`
    /// (each call costs the host memory until the run ends, and time waiting on tools does not
    /// count against `cpu_time`). At least 1.
    pub max_sub_calls: u64,
    /// How long sub-calls still running when the run settles get to finish (after
    /// [`RunOver`](crate::RunOver) fires, never past the wall-clock ceiling) before they are
    /// dropped unfinished.
    pub sub_call_grace: Duration,
}

/// The default of [`Limits::max_sub_calls`].
pub const DEFAULT_MAX_SUB_CALLS: u64 = 1_000;

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 256 << 20,
            cpu_time: Duration::from_secs(60),
            wall_clock: Duration::from_secs(600),
            output_bytes: 64 << 20,
            max_parallel_sub_calls: 10,
            max_sub_calls: DEFAULT_MAX_SUB_CALLS,
            sub_call_grace: Duration::from_secs(5),
        }
    }
}

impl Limits {
    /// Checks every limit's range.
    ///
    /// # Errors
    /// [`CodeRuntimeError::InvalidLimit`] naming the first limit out of range.
    pub fn validate(&self) -> Result<(), CodeRuntimeError> {
        let invalid = |field, reason: &str| {
            Err(CodeRuntimeError::InvalidLimit {
                field,
                reason: reason.to_owned(),
            })
        };
        if self.memory_bytes < 1 << 20 {
            return invalid("memory_bytes", "must be at least 1 MiB");
        }
        if self.cpu_time.is_zero() {
            return invalid("cpu_time", "must be positive");
        }
        if self.wall_clock.is_zero() {
            return invalid("wall_clock", "must be positive");
        }
        if self.output_bytes < 4 {
            return invalid("output_bytes", "must be at least 4");
        }
        if self.max_parallel_sub_calls == 0 {
            return invalid("max_parallel_sub_calls", "must be a positive integer");
        }
        if self.max_sub_calls == 0 {
            return invalid("max_sub_calls", "must be a positive integer");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_limits_are_valid() {
        Limits::default().validate().unwrap();
    }

    #[test]
    fn zero_parallelism_is_refused_by_name() {
        let limits = Limits {
            max_parallel_sub_calls: 0,
            ..Limits::default()
        };
        let err = limits.validate().unwrap_err().to_string();
        assert!(err.contains("max_parallel_sub_calls"), "{err}");
    }
}
