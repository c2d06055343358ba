//! `debug/fault`: a plugin that fails on purpose, to prove one bad entry fails alone.
//!
//! Choose the mode by the failure you want to see:
//! - `ok`: behaves (registers one effect);
//! - `error`: `apply` returns an error;
//! - `panic`: `apply` panics (the runtime contains it);
//! - `hang`: `apply` never finishes (the entry's timeout turns it into `failed`);
//! - `listener-panic`: registers a listener that panics and emits to it; the panic is contained
//!   as an incident and the entry still ends `active`;
//! - `seeded`: one of the above, drawn from `ctx.schedule().draw("fault/<entry id>", 5)`, so each
//!   seed picks its own fault and a seed replays it.
//!
//! `delay_ms` sleeps before the fault. It uses the clock, so runs with a delay replay their
//! schedule but not necessarily their timing.

use std::time::Duration;

use cordis_runtime::{BoxError, Context, Event, Plugin};
use serde::Deserialize;

use crate::debug::register_effect;

/// The faults `debug/fault` can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultMode {
    /// No fault.
    Ok,
    /// `apply` returns an error.
    Error,
    /// `apply` panics.
    Panic,
    /// `apply` never finishes.
    Hang,
    /// A listener panics; the entry stays active.
    ListenerPanic,
    /// One of the others, chosen by the seed.
    Seeded,
}

/// The modes `seeded` draws from, in draw order.
pub const SEEDED_MODES: [FaultMode; 5] = [
    FaultMode::Ok,
    FaultMode::Error,
    FaultMode::Panic,
    FaultMode::Hang,
    FaultMode::ListenerPanic,
];

/// Config of `debug/fault`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// Which fault.
    pub mode: FaultMode,
    /// Sleep this long first.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// A free-form note, ignored (handy for `${{ env.NAME }}` examples).
    #[serde(default)]
    pub note: Option<String>,
}

/// The `debug/fault` plugin.
#[derive(Debug, Clone, Copy)]
pub struct Fault;

/// The event `listener-panic` emits.
#[derive(Debug)]
pub struct FaultEvent;

impl Event for FaultEvent {
    const NAME: &'static str = "debug/fault";
    type Output = ();
}

impl Fault {
    /// The mode an entry with `config` and label `label` runs under `ctx`'s schedule.
    pub fn resolve_mode(ctx: &Context, label: &str, mode: FaultMode) -> FaultMode {
        match mode {
            FaultMode::Seeded => {
                let i = ctx
                    .schedule()
                    .draw(&format!("fault/{label}"), SEEDED_MODES.len() as u64);
                SEEDED_MODES[usize::try_from(i).unwrap_or(0) % SEEDED_MODES.len()]
            }
            other => other,
        }
    }
}

impl Plugin for Fault {
    type Config = FaultConfig;

    fn name(&self) -> &str {
        "debug/fault"
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &FaultConfig) -> Result<(), BoxError> {
        let label = ctx.label().unwrap_or("debug/fault").to_owned();
        let mode = Fault::resolve_mode(&ctx, &label, config.mode);
        if let Some(ms) = config.delay_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        match mode {
            FaultMode::Ok | FaultMode::Seeded => {
                register_effect(&ctx, "effect").await;
                Ok(())
            }
            FaultMode::Error => Err(format!("debug/fault: injected error in \"{label}\"").into()),
            FaultMode::Panic => panic!("debug/fault: injected panic in \"{label}\""),
            FaultMode::Hang => {
                register_effect(&ctx, "effect before hanging").await;
                std::future::pending::<()>().await;
                Ok(())
            }
            FaultMode::ListenerPanic => {
                let who = label.clone();
                let _ = ctx.on::<FaultEvent>(move |_| {
                    panic!("debug/fault: injected listener panic in \"{who}\"")
                });
                ctx.emit(FaultEvent);
                register_effect(&ctx, "effect").await;
                Ok(())
            }
        }
    }
}
