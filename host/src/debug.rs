//! Small built-in plugins for realistic test configs: `debug/noop`, `debug/provide` and
//! `debug/claim`.
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

/// Provides the marker service `name`.
fn provide_marker(
    ctx: &Context,
    name: MarkerName,
) -> Result<cordis_runtime::EffectHandle, cordis_runtime::ServiceError> {
    match name {
        MarkerName::Alpha => ctx.provide(Marker::<0>),
        MarkerName::Beta => ctx.provide(Marker::<1>),
        MarkerName::Gamma => ctx.provide(Marker::<2>),
        MarkerName::Delta => ctx.provide(Marker::<3>),
        MarkerName::Epsilon => ctx.provide(Marker::<4>),
        MarkerName::Zeta => ctx.provide(Marker::<5>),
        MarkerName::Eta => ctx.provide(Marker::<6>),
        MarkerName::Theta => ctx.provide(Marker::<7>),
    }
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

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
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
#[allow(
    missing_docs,
    reason = "placeholder marker names, documented as a set by `MARKER_NAMES`"
)]
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

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &ProvideConfig) -> Result<(), BoxError> {
        ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
        ctx.trace(
            Schedule::TRACE_PROVIDE,
            MARKER_NAMES[config.service as usize],
        );
        let _ = provide_marker(&ctx, config.service)?;
        Ok(())
    }
}

/// `debug/claim`: registers what its config lists at run time *without stating it*
/// ([`Plugin::claims`] says nothing), as a third-party plugin might: tools, prompt sections,
/// marker services, and a `system-prompt/assemble` listener appending a note. For the
/// proofs that two entries' run-time claims and listeners resolve the same in every order.
#[derive(Debug, Clone, Copy)]
pub struct Claimer;

/// Config of `debug/claim`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimConfig {
    /// Tools to register (each answers its entry's label).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Sections to register (order 10, text naming the entry).
    #[serde(default)]
    pub sections: Vec<String>,
    /// Marker services to provide.
    #[serde(default)]
    pub services: Vec<MarkerName>,
    /// A note an assemble listener appends as a last section (listener order shows).
    #[serde(default)]
    pub note: Option<String>,
}

const CLAIM_INJECT: &[cordis_runtime::Inject] = &[
    cordis_runtime::Inject::required(cordis_tools::ToolRegistry::NAME),
    cordis_runtime::Inject::required(cordis_system_prompt::SystemPrompt::NAME),
];

impl Plugin for Claimer {
    type Config = ClaimConfig;

    fn name(&self) -> &str {
        "debug/claim"
    }

    fn inject(&self) -> &[cordis_runtime::Inject] {
        CLAIM_INJECT
    }

    async fn apply(&self, ctx: Context, config: &ClaimConfig) -> Result<(), BoxError> {
        use cordis_system_prompt::{AssembledSection, Section, SystemPrompt, SystemPromptAssemble};
        use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
        let registry = ctx.require::<ToolRegistry>()?;
        let prompt = ctx.require::<SystemPrompt>()?;
        let who = ctx.label().unwrap_or("debug/claim").to_owned();
        for name in &config.tools {
            let answer = who.clone();
            let schema = ToolSchema {
                name: name.clone(),
                description: format!("{name} of {who}"),
                parameters: serde_json::json!({"type": "object"}).into(),
            };
            let def = ToolDefinition::new(schema, move |_, _| {
                let answer = answer.clone();
                async move { Ok(ToolOutput::new(answer)) }
            });
            let _ = registry.register_scheduled(&ctx, def).await?;
        }
        for name in &config.sections {
            ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
            let section = Section::fixed(name.clone(), 10.0, format!("{name} by {who}"));
            let _ = prompt.section(&ctx, section)?;
        }
        for service in &config.services {
            ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
            let _ = provide_marker(&ctx, *service)?;
        }
        if let Some(note) = &config.note {
            ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
            let note = note.clone();
            let _ = ctx.on_waterfall::<SystemPromptAssemble, _, _>(
                cordis_runtime::Position::Back,
                move |mut v, next| {
                    v.assembly.sections.push(AssembledSection {
                        name: format!("note:{}", v.assembly.sections.len()),
                        order: 1_000.0,
                        text: note.clone(),
                    });
                    next.run(v)
                },
            );
        }
        Ok(())
    }
}
