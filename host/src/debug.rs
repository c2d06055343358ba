//! Small built-in plugins for realistic test configs: `debug/noop` and `debug/provide`.
//!
//! Runtime services are named by a `const` on their type ([`Service::NAME`]), so a service whose
//! name comes from a config file cannot be made at run time. `debug/provide` therefore offers a
//! fixed set of marker services, [`MARKER_NAMES`], one type each.

use cordis_runtime::{BoxError, Context, Plugin, Schedule, Service};
use serde::Deserialize;

/// The service names `debug/provide` can provide.
pub const MARKER_NAMES: [&str; 8] = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
];

/// A marker service named `MARKER_NAMES[I]`.
#[derive(Debug)]
pub struct Marker<const I: usize>;

impl<const I: usize> Service for Marker<I> {
    const NAME: &'static str = MARKER_NAMES[I];
}

/// Registers one effect step by step, with a schedule point before it, and traces it.
pub(crate) async fn register_effect(ctx: &Context, what: &str) {
    ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
    ctx.trace(Schedule::TRACE_REGISTER, what);
    let _ = ctx.effect(format!("debug {what}"), || {});
}

/// `debug/noop`: config `{}`; registers one effect.
#[derive(Debug, Clone, Copy)]
pub struct Noop;

/// Config of `debug/noop`: nothing.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoopConfig {}

impl Plugin for Noop {
    type Config = NoopConfig;

    fn name(&self) -> &str {
        "debug/noop"
    }

    async fn apply(&self, ctx: Context, _config: &NoopConfig) -> Result<(), BoxError> {
        register_effect(&ctx, "effect").await;
        Ok(())
    }
}

/// `debug/provide`: config `{service: alpha}`; provides that marker service.
#[derive(Debug, Clone, Copy)]
pub struct Provide;

/// One of [`MARKER_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum MarkerName {
    Alpha,
    Beta,
    Gamma,
    Delta,
    Epsilon,
    Zeta,
    Eta,
    Theta,
}

/// Config of `debug/provide`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvideConfig {
    /// The marker service to provide.
    pub service: MarkerName,
}

impl Plugin for Provide {
    type Config = ProvideConfig;

    fn name(&self) -> &str {
        "debug/provide"
    }

    fn provides(&self, config: &ProvideConfig) -> Vec<String> {
        vec![MARKER_NAMES[config.service as usize].to_owned()]
    }

    async fn apply(&self, ctx: Context, config: &ProvideConfig) -> Result<(), BoxError> {
        ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
        ctx.trace(
            Schedule::TRACE_PROVIDE,
            MARKER_NAMES[config.service as usize],
        );
        let _ = match config.service {
            MarkerName::Alpha => ctx.provide(Marker::<0>)?,
            MarkerName::Beta => ctx.provide(Marker::<1>)?,
            MarkerName::Gamma => ctx.provide(Marker::<2>)?,
            MarkerName::Delta => ctx.provide(Marker::<3>)?,
            MarkerName::Epsilon => ctx.provide(Marker::<4>)?,
            MarkerName::Zeta => ctx.provide(Marker::<5>)?,
            MarkerName::Eta => ctx.provide(Marker::<6>)?,
            MarkerName::Theta => ctx.provide(Marker::<7>)?,
        };
        Ok(())
    }
}
