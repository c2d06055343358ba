//! The `system-prompt` service: sections, variables and tool providers, each registration an
//! effect of the registering scope, and `assemble()`.
//!
//! # Determinism
//! Sections sort by `order`, ties by name (UTF-16 code units) — beyond the reference, which keeps
//! registration order for ties — and tools take the canonical order (see `order.rs`) before the
//! `system-prompt/assemble` waterfall, so nothing before that seam depends on registration order.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, Weak};

use cordis_runtime::{Claim, Context, EffectHandle, Event, OrderKey, Service, Waterfall, lock};

use crate::assembly::{AssembleContext, AssembledSection, PromptAssembly};
use crate::error::{AssembleError, RegisterError, ToolOrderError};
use crate::order::{ToolOrder, check_known, check_reserved, compare_utf16, order_checked};
use crate::render::is_variable_name;
use crate::schema::ToolSchema;

/// Computes a section's text for one assembly.
pub type SectionFn = Arc<dyn Fn(&AssembleContext) -> String + Send + Sync>;
/// Computes a variable's value for one assembly; `None` = no value (an error if referenced).
pub type VariableFn = Arc<dyn Fn(&AssembleContext) -> Option<String> + Send + Sync>;
/// Replaces a section's text for some assemblies: `Some(text)` for those it applies to.
pub type OverrideFn = Arc<dyn Fn(&AssembleContext) -> Option<String> + Send + Sync>;
/// Replaces the configured `toolOrder` for some assemblies: `Some(order)` (itself `None` for
/// plain lexicographic order) for those it applies to.
pub type OrderOverrideFn = Arc<dyn Fn(&AssembleContext) -> Option<Option<ToolOrder>> + Send + Sync>;
/// Offers tools for one assembly.
pub type ToolProviderFn = Arc<dyn Fn(&AssembleContext) -> ToolProviderResult + Send + Sync>;

/// The text of a section: fixed, or computed per assembly.
#[derive(Clone)]
pub enum SectionText {
    /// The same text every time.
    Static(String),
    /// Text computed from the assembly context.
    Dynamic(SectionFn),
}

impl fmt::Debug for SectionText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SectionText::Static(s) => f.debug_tuple("Static").field(s).finish(),
            SectionText::Dynamic(_) => f.write_str("Dynamic(..)"),
        }
    }
}

/// A named, ordered piece of the system prompt.
#[derive(Debug, Clone)]
pub struct Section {
    /// Unique name (`deployment:persona`, `tools:bash`).
    pub name: String,
    /// Position; lower renders earlier. Must be finite.
    pub order: f64,
    /// The text.
    pub text: SectionText,
}

impl Section {
    /// A section with fixed text.
    pub fn fixed(name: impl Into<String>, order: f64, text: impl Into<String>) -> Self {
        Section {
            name: name.into(),
            order,
            text: SectionText::Static(text.into()),
        }
    }

    /// A section whose text is computed per assembly; an assembly for which it computes an
    /// empty text leaves it out (not even its name appears), so it can apply to some scopes only.
    pub fn dynamic(
        name: impl Into<String>,
        order: f64,
        text: impl Fn(&AssembleContext) -> String + Send + Sync + 'static,
    ) -> Self {
        Section {
            name: name.into(),
            order,
            text: SectionText::Dynamic(Arc::new(text)),
        }
    }
}

/// What a tool provider offers for one assembly.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolProviderResult {
    /// The schemas the model may see.
    pub schemas: Vec<ToolSchema>,
    /// The pre-restriction names `toolOrder` is validated against; `None` = the schemas' names.
    pub known_names: Option<Vec<String>>,
    /// Why this provider cannot serve this assembly (e.g. a Code Mode scope without a code
    /// runtime): the assembly fails with this message.
    pub unavailable: Option<String>,
}

/// The `system-prompt/assemble` waterfall: listeners see the canonical assembly and may change it.
///
/// What a listener adds is not re-sorted; a listener owns the determinism of what it emits.
pub struct SystemPromptAssemble;

/// The value flowing through [`SystemPromptAssemble`].
#[derive(Debug, Clone)]
pub struct AssembleValue {
    /// The assembly so far.
    pub assembly: PromptAssembly,
    /// Who it is assembled for.
    pub context: AssembleContext,
}

impl Waterfall for SystemPromptAssemble {
    const NAME: &'static str = "system-prompt/assemble";
    type Value = AssembleValue;
}

/// Emitted when a section, variable or tool provider is added or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemPromptChange {
    /// `section`, `variable` or `tool provider`.
    pub what: &'static str,
    /// The section or variable name (empty for tool providers).
    pub name: String,
    /// True when added, false when removed.
    pub added: bool,
}

impl Event for SystemPromptChange {
    const NAME: &'static str = "system-prompt/change";
    type Output = ();
}

struct SectionEntry {
    id: u64,
    /// The entry that registered it (see [`Context::claim_owner`]).
    owner: cordis_runtime::ScopeId,
    order: f64,
    text: SectionText,
}

#[derive(Default)]
struct State {
    next_id: u64,
    /// Every registration of each section name: rendered only while one entry holds it.
    sections: BTreeMap<String, Vec<SectionEntry>>,
    /// Every registration of each variable (id, owner, value): used only while one entry holds
    /// it, like a section.
    variables: BTreeMap<String, Vec<(u64, cordis_runtime::ScopeId, VariableFn)>>,
    /// Keyed by registration id; the order only affects error reporting, never the output.
    providers: BTreeMap<u64, ToolProviderFn>,
    /// Section overrides by the registering scope's place, then registration id.
    overrides: BTreeMap<(OrderKey, u64), (String, OverrideFn)>,
    /// `toolOrder` overrides by the registering scope's place, then registration id.
    order_overrides: BTreeMap<(OrderKey, u64), OrderOverrideFn>,
}

impl State {
    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// The system-prompt assembly service.
pub struct SystemPrompt {
    ctx: Context,
    tool_order: Option<ToolOrder>,
    state: Arc<Mutex<State>>,
}

impl Service for SystemPrompt {
    const NAME: &'static str = "system-prompt";
}

impl fmt::Debug for SystemPrompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemPrompt")
            .field("tool_order", &self.tool_order)
            .finish_non_exhaustive()
    }
}

impl SystemPrompt {
    /// Creates the service; `ctx` is the scope that owns it (waterfalls and events go through it).
    ///
    /// # Errors
    /// A [`ToolOrderError`] when `tool_order` has no rest entry or lists a name twice.
    pub fn new(ctx: Context, tool_order: Option<Vec<String>>) -> Result<Self, ToolOrderError> {
        let tool_order = tool_order.map(ToolOrder::new).transpose()?;
        Ok(SystemPrompt::with_order(ctx, tool_order))
    }

    /// Creates the service with an already validated `toolOrder` (see [`SystemPrompt::new`]).
    pub fn with_order(ctx: Context, tool_order: Option<ToolOrder>) -> Self {
        SystemPrompt {
            ctx,
            tool_order,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// The validated `toolOrder`, if configured.
    pub fn tool_order(&self) -> Option<&ToolOrder> {
        self.tool_order.as_ref()
    }

    /// Registers a section as an effect of `ctx`'s scope.
    ///
    /// # Determinism
    /// A name two entries register is contested (see [`cordis_runtime::Claim`]): neither
    /// renders, both report it, and the survivor's renders once the other leaves.
    ///
    /// # Errors
    /// Empty name, a name this scope's entry registered already, non-finite order, or a dead
    /// scope.
    pub fn section(&self, ctx: &Context, section: Section) -> Result<EffectHandle, RegisterError> {
        let Section { name, order, text } = section;
        if name.is_empty() {
            return Err(RegisterError::EmptySectionName);
        }
        if !order.is_finite() {
            return Err(RegisterError::NonFiniteOrder { name });
        }
        self.live(ctx, "section", &name)?;
        let owner = ctx.claim_owner();
        let id = {
            let mut st = lock(&self.state);
            if st
                .sections
                .get(&name)
                .is_some_and(|held| held.iter().any(|e| e.owner == owner))
            {
                return Err(RegisterError::DuplicateSection { name });
            }
            let id = st.next();
            let entry = SectionEntry {
                id,
                owner,
                order,
                text,
            };
            // The key is copied only for a name nobody holds yet.
            match st.sections.get_mut(&name) {
                Some(held) => held.push(entry),
                None => {
                    st.sections.insert(name.clone(), vec![entry]);
                }
            }
            id
        };
        let claim = ctx.claim(Claim::section(name.clone()));
        Ok(self.finish(ctx, "section", name, move |st, name| {
            if let Some(held) = st.sections.get_mut(name) {
                held.retain(|e| e.id != id);
                if held.is_empty() {
                    st.sections.remove(name);
                }
            }
            claim.dispose();
        }))
    }

    /// Registers a variable `{{name}}` as an effect of `ctx`'s scope.
    ///
    /// # Determinism
    /// As [`SystemPrompt::section`]: a name two entries register is contested, with no value
    /// for either, until one leaves.
    ///
    /// # Errors
    /// A name not matching `^[a-z][a-z0-9_]*$`, a name this scope's entry registered already, or
    /// a dead scope.
    pub fn variable(
        &self,
        ctx: &Context,
        name: &str,
        value: impl Fn(&AssembleContext) -> Option<String> + Send + Sync + 'static,
    ) -> Result<EffectHandle, RegisterError> {
        if !is_variable_name(name) {
            return Err(RegisterError::InvalidVariableName {
                name: name.to_owned(),
            });
        }
        self.live(ctx, "variable", name)?;
        let owner = ctx.claim_owner();
        let id = {
            let mut st = lock(&self.state);
            if st
                .variables
                .get(name)
                .is_some_and(|held| held.iter().any(|(_, o, _)| *o == owner))
            {
                return Err(RegisterError::DuplicateVariable {
                    name: name.to_owned(),
                });
            }
            let id = st.next();
            let entry: (u64, _, VariableFn) = (id, owner, Arc::new(value));
            // The key is copied only for a name nobody holds yet.
            match st.variables.get_mut(name) {
                Some(held) => held.push(entry),
                None => {
                    st.variables.insert(name.to_owned(), vec![entry]);
                }
            }
            id
        };
        let claim = ctx.claim(Claim::new("variable", name));
        Ok(
            self.finish(ctx, "variable", name.to_owned(), move |st, name| {
                if let Some(held) = st.variables.get_mut(name) {
                    held.retain(|(i, _, _)| *i != id);
                    if held.is_empty() {
                        st.variables.remove(name);
                    }
                }
                claim.dispose();
            }),
        )
    }

    /// Replaces the text of section `name` in the assemblies for which `text` returns `Some`,
    /// as an effect of `ctx`'s scope (an agent preset's persona replaces `deployment:persona`
    /// for the agents joined to it). The section keeps its name and order; a section nobody
    /// registered is not created.
    ///
    /// # Determinism
    /// When several overrides of one section apply to one assembly, the one whose scope comes
    /// first in canonical order ([`cordis_runtime::OrderKey`]: its entry's place in the
    /// configuration) wins, never the first registered; a host refuses two override rows of
    /// one kind in one composition before loading (their [`Claim::override_of`]).
    ///
    /// # Errors
    /// An empty name or a dead scope.
    pub fn override_section(
        &self,
        ctx: &Context,
        name: &str,
        text: impl Fn(&AssembleContext) -> Option<String> + Send + Sync + 'static,
    ) -> Result<EffectHandle, RegisterError> {
        if name.is_empty() {
            return Err(RegisterError::EmptySectionName);
        }
        self.live(ctx, "section override", name)?;
        let id = {
            let mut st = lock(&self.state);
            let key = (ctx.order_key().clone(), st.next());
            st.overrides
                .insert(key.clone(), (name.to_owned(), Arc::new(text)));
            key
        };
        Ok(
            self.finish(ctx, "section override", name.to_owned(), move |st, _| {
                st.overrides.remove(&id);
            }),
        )
    }

    /// Replaces the configured `toolOrder` in the assemblies for which `order` returns
    /// `Some(order)` (`Some(None)`: lexicographic), as an effect of `ctx`'s scope: an agent
    /// preset presenting its tools in Code Mode drops a deployment order that names native
    /// tools its agents no longer receive.
    ///
    /// # Determinism
    /// As [`SystemPrompt::override_section`]: the applying override first in canonical order
    /// wins.
    ///
    /// # Errors
    /// A dead scope.
    pub fn override_tool_order(
        &self,
        ctx: &Context,
        order: impl Fn(&AssembleContext) -> Option<Option<ToolOrder>> + Send + Sync + 'static,
    ) -> Result<EffectHandle, RegisterError> {
        self.live(ctx, "tool order override", "")?;
        let id = {
            let mut st = lock(&self.state);
            let key = (ctx.order_key().clone(), st.next());
            st.order_overrides.insert(key.clone(), Arc::new(order));
            key
        };
        Ok(
            self.finish(ctx, "tool order override", String::new(), move |st, _| {
                st.order_overrides.remove(&id);
            }),
        )
    }

    /// Registers a tool provider as an effect of `ctx`'s scope.
    ///
    /// # Errors
    /// [`RegisterError::ScopeGone`] when `ctx`'s scope is no longer live.
    pub fn tools(
        &self,
        ctx: &Context,
        provider: impl Fn(&AssembleContext) -> ToolProviderResult + Send + Sync + 'static,
    ) -> Result<EffectHandle, RegisterError> {
        self.live(ctx, "tool provider", "")?;
        let id = {
            let mut st = lock(&self.state);
            let id = st.next();
            st.providers.insert(id, Arc::new(provider));
            id
        };
        Ok(
            self.finish(ctx, "tool provider", String::new(), move |st, _| {
                st.providers.remove(&id);
            }),
        )
    }

    fn live(&self, ctx: &Context, what: &'static str, name: &str) -> Result<(), RegisterError> {
        if ctx.is_live() {
            Ok(())
        } else {
            Err(RegisterError::ScopeGone {
                what,
                name: name.to_owned(),
            })
        }
    }

    /// Files the undo (given the registered name) as an effect of `ctx`'s scope, then
    /// announces the change. The undo is registered before the event, so a panicking listener
    /// cannot leak the registration.
    fn finish(
        &self,
        ctx: &Context,
        what: &'static str,
        name: String,
        undo: impl FnOnce(&mut State, &str) + Send + 'static,
    ) -> EffectHandle {
        let weak: Weak<Mutex<State>> = Arc::downgrade(&self.state);
        let events = self.ctx.clone();
        let added = SystemPromptChange {
            what,
            name: name.clone(),
            added: true,
        };
        let handle = ctx.effect(effect_label(what), move || {
            if let Some(state) = weak.upgrade() {
                undo(&mut lock(&state), &name);
                events.emit(SystemPromptChange {
                    what,
                    name,
                    added: false,
                });
            }
        });
        self.ctx.emit(added);
        handle
    }

    /// Assembles the prompt for `context`: resolved sections in order, the canonical tool list,
    /// variables; then runs the `system-prompt/assemble` waterfall over it.
    ///
    /// # Errors
    /// [`AssembleError`] for a reserved or duplicate tool name, a `toolOrder` entry nobody
    /// knows, a panicking callback, or a panicking waterfall listener.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is registered or changed.
    pub async fn assemble(
        &self,
        context: AssembleContext,
    ) -> Result<PromptAssembly, AssembleError> {
        let assembly = self.initial(&context)?;
        let out = self
            .ctx
            .waterfall::<SystemPromptAssemble>(AssembleValue { assembly, context })
            .await?;
        Ok(out.assembly)
    }

    /// The assembly before the waterfall (canonical tools, sorted sections).
    ///
    /// # Errors
    /// As [`SystemPrompt::assemble`], minus the waterfall.
    pub fn initial(&self, context: &AssembleContext) -> Result<PromptAssembly, AssembleError> {
        // Every section and variable (and, through the providers, every tool) is read.
        cordis_runtime::note_listing("section");
        cordis_runtime::note_listing("variable");
        // Snapshot under the lock, call user code without it (a callback may register things).
        let (sections, variables, providers, overrides, order_overrides) = {
            let st = lock(&self.state);
            let overrides: Vec<(String, OverrideFn)> = st.overrides.values().cloned().collect();
            let order_overrides: Vec<OrderOverrideFn> =
                st.order_overrides.values().cloned().collect();
            // A contested name renders nothing.
            let sections: Vec<(String, f64, SectionText)> = st
                .sections
                .iter()
                .filter_map(|(n, held)| match held.as_slice() {
                    [e] => Some((n.clone(), e.order, e.text.clone())),
                    _ => None,
                })
                .collect();
            // A contested variable has no value.
            let variables: Vec<(String, VariableFn)> = st
                .variables
                .iter()
                .filter_map(|(n, held)| match held.as_slice() {
                    [(_, _, f)] => Some((n.clone(), f.clone())),
                    _ => None,
                })
                .collect();
            let providers: Vec<ToolProviderFn> = st.providers.values().cloned().collect();
            (sections, variables, providers, overrides, order_overrides)
        };

        let mut assembled = Vec::with_capacity(sections.len());
        for (name, order, text) in sections {
            let mut replaced = None;
            for (_, f) in overrides.iter().filter(|(n, _)| *n == name) {
                let site = || format!("override of section \"{name}\"");
                if let Some(text) = guarded(site, || f(context))? {
                    replaced = Some(text);
                    break;
                }
            }
            let text = match (replaced, text) {
                (Some(text), _) => text,
                (None, SectionText::Static(s)) => s,
                (None, SectionText::Dynamic(f)) => {
                    let text = guarded(|| format!("section \"{name}\""), || f(context))?;
                    // A computed section that is empty for this assembly is not part of it:
                    // that is how a section applies to some scopes only (Code Mode's SDK).
                    if text.is_empty() {
                        continue;
                    }
                    text
                }
            };
            assembled.push(AssembledSection { name, order, text });
        }
        assembled.sort_by(|a, b| {
            a.order
                .partial_cmp(&b.order)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| compare_utf16(&a.name, &b.name))
        });

        let mut tool_order = None;
        for f in &order_overrides {
            if let Some(order) = guarded(|| "toolOrder override".to_owned(), || f(context))? {
                tool_order = Some(order);
                break;
            }
        }
        let tool_order = tool_order.unwrap_or_else(|| self.tool_order.clone());
        // Every provider is asked (in registration order, the first unavailable one failing
        // the assembly) before the tools are checked and ordered.
        let mut results = Vec::with_capacity(providers.len());
        for provider in providers {
            let result = guarded(|| "tool provider".to_owned(), || provider(context))?;
            if let Some(message) = result.unavailable {
                return Err(AssembleError::ProviderUnavailable { message });
            }
            results.push((result.schemas, result.known_names));
        }
        for (schemas, _) in &results {
            check_reserved(schemas)?;
        }
        // The known names a `toolOrder` is validated against: a provider's declared ones, else
        // its schemas' names; read in place, copied only to report unknown entries.
        if let Some(order) = &tool_order {
            let known = results.iter().flat_map(|(schemas, declared)| {
                let (declared, offered) = match declared {
                    Some(names) => (Some(names.iter().map(String::as_str)), None),
                    None => (None, Some(schemas.iter().map(|s| s.name.as_str()))),
                };
                declared
                    .into_iter()
                    .flatten()
                    .chain(offered.into_iter().flatten())
            });
            check_known(order, known)?;
        }
        let tools: Vec<ToolSchema> = results
            .into_iter()
            .flat_map(|(schemas, _)| schemas)
            .collect();
        let tools = order_checked(tools, tool_order.as_ref());
        // Canonical order puts schemas sharing a name next to each other.
        if let Some(pair) = tools.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(AssembleError::DuplicateTool {
                name: pair[0].name.clone(),
            });
        }

        let mut values = BTreeMap::new();
        for (name, f) in variables {
            let value = guarded(|| format!("variable \"{name}\""), || f(context))?;
            values.insert(name, value);
        }
        Ok(PromptAssembly {
            sections: assembled,
            tools,
            deferred: Vec::new(),
            variables: values,
        })
    }
}

/// Runs a user callback, turning a panic into an [`AssembleError`] (naming the call site
/// `what` describes, worked out only then) instead of unwinding the caller.
fn guarded<T>(what: impl FnOnce() -> String, f: impl FnOnce() -> T) -> Result<T, AssembleError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| AssembleError::CallbackPanicked {
        what: what(),
        message: panic_text(&*payload),
    })
}

/// The label of a registration's effect (`system-prompt section`, …), without formatting one
/// per registration.
fn effect_label(what: &'static str) -> Cow<'static, str> {
    Cow::Borrowed(match what {
        "section" => "system-prompt section",
        "variable" => "system-prompt variable",
        "section override" => "system-prompt section override",
        "tool order override" => "system-prompt tool order override",
        "tool provider" => "system-prompt tool provider",
        _ => return Cow::Owned(format!("system-prompt {what}")),
    })
}

pub(crate) use cordis_runtime::panic_message as panic_text;

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use cordis_runtime::Position;

    use super::*;
    use crate::order::TOOL_ORDER_REST;

    fn schema(name: &str) -> ToolSchema {
        ToolSchema {
            name: name.to_owned(),
            description: format!("{name} tool"),
            parameters: serde_json::json!({"type": "object"}).into(),
        }
    }

    fn provider(names: &[&str]) -> impl Fn(&AssembleContext) -> ToolProviderResult + use<> {
        let schemas: Vec<ToolSchema> = names.iter().map(|n| schema(n)).collect();
        move |_| ToolProviderResult {
            schemas: schemas.clone(),
            known_names: None,
            unavailable: None,
        }
    }

    fn names(assembly: &PromptAssembly) -> Vec<&str> {
        assembly.tools.iter().map(|t| t.name.as_str()).collect()
    }

    fn service(root: &Context, tool_order: Option<&[&str]>) -> SystemPrompt {
        SystemPrompt::new(
            root.clone(),
            tool_order.map(|o| o.iter().map(|s| (*s).to_owned()).collect()),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn an_override_replaces_a_section_only_where_it_applies_and_unwinds() {
        let root = Context::root();
        let sp = service(&root, None);
        let _ = sp
            .section(
                &root,
                Section::fixed("deployment:persona", 0.0, "deployment"),
            )
            .unwrap();
        let _ = sp
            .section(&root, Section::fixed("later", 1.0, "after"))
            .unwrap();
        let row = root.child_scope("preset row");
        let joined = crate::ScopeKey(7);
        let handle = sp
            .override_section(&row.context().unwrap(), "deployment:persona", move |a| {
                (a.scope == Some(joined)).then(|| "preset".to_owned())
            })
            .unwrap();
        // Nobody registered "ghost": an override creates nothing.
        let _ = sp
            .override_section(&root, "ghost", |_| Some("boo".into()))
            .unwrap();
        let text = |a: AssembleContext| {
            let sp = &sp;
            async move { sp.assemble(a).await.unwrap().render().unwrap() }
        };
        assert_eq!(
            text(AssembleContext::scoped(joined)).await,
            "preset\n\nafter"
        );
        assert_eq!(
            text(AssembleContext::scoped(crate::ScopeKey(8))).await,
            "deployment\n\nafter"
        );
        assert_eq!(text(AssembleContext::global()).await, "deployment\n\nafter");
        drop(handle);
        row.dispose();
        assert_eq!(
            text(AssembleContext::scoped(joined)).await,
            "deployment\n\nafter"
        );
        root.dispose();
    }

    #[tokio::test]
    async fn a_tool_order_override_applies_only_where_it_says() {
        let root = Context::root();
        let sp = service(&root, Some(&["zulu", TOOL_ORDER_REST]));
        let _ = sp.tools(&root, provider(&["alpha", "zulu"])).unwrap();
        let joined = crate::ScopeKey(3);
        let handle = sp
            .override_tool_order(&root, move |a| (a.scope == Some(joined)).then_some(None))
            .unwrap();
        let order = |a| {
            let sp = &sp;
            async move { names(&sp.assemble(a).await.unwrap()).join(",") }
        };
        assert_eq!(order(AssembleContext::scoped(joined)).await, "alpha,zulu");
        assert_eq!(order(AssembleContext::global()).await, "zulu,alpha");
        handle.dispose();
        assert_eq!(order(AssembleContext::scoped(joined)).await, "zulu,alpha");
        root.dispose();
    }

    #[tokio::test]
    async fn forward_and_reverse_provider_registration_assemble_identically() {
        let root = Context::root();
        let forward = service(&root, None);
        let _ = forward.tools(&root, provider(&["zulu"])).unwrap();
        let _ = forward.tools(&root, provider(&["alpha"])).unwrap();
        let backward = service(&root, None);
        let _ = backward.tools(&root, provider(&["alpha"])).unwrap();
        let _ = backward.tools(&root, provider(&["zulu"])).unwrap();
        let a = forward.assemble(AssembleContext::global()).await.unwrap();
        let b = backward.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(names(&a), ["alpha", "zulu"]);
        assert_eq!(a.header_json().unwrap(), b.header_json().unwrap());
        root.dispose();
    }

    #[tokio::test]
    async fn a_configured_tool_order_places_listed_tools_and_the_rest() {
        let root = Context::root();
        let sp = service(&root, Some(&["todo_write", TOOL_ORDER_REST, "bash"]));
        let _ = sp.tools(&root, provider(&["bash", "echo_b"])).unwrap();
        let _ = sp
            .tools(&root, provider(&["todo_write", "echo_a"]))
            .unwrap();
        let a = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(names(&a), ["todo_write", "echo_a", "echo_b", "bash"]);
        root.dispose();
    }

    #[tokio::test]
    async fn every_assemble_rejects_an_unregistered_listed_tool() {
        let root = Context::root();
        let sp = service(&root, Some(&["ghost", TOOL_ORDER_REST]));
        let _ = sp.tools(&root, provider(&["alpha"])).unwrap();
        for _ in 0..2 {
            let err = sp.assemble(AssembleContext::global()).await.unwrap_err();
            assert_eq!(
                err.to_string(),
                "toolOrder lists unregistered tool \"ghost\"; known tools: alpha"
            );
        }
        // A provider may declare a name known (e.g. restricted away in this scope): legal absence.
        let _ = sp
            .tools(&root, |_| ToolProviderResult {
                schemas: vec![],
                known_names: Some(vec!["ghost".into()]),
                unavailable: None,
            })
            .unwrap();
        let a = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(names(&a), ["alpha"]);
        root.dispose();
    }

    #[tokio::test]
    async fn a_provider_returning_the_rest_entry_fails_the_assembly() {
        let root = Context::root();
        let sp = service(&root, None);
        let _ = sp.tools(&root, provider(&[TOOL_ORDER_REST])).unwrap();
        let err = sp.assemble(AssembleContext::global()).await.unwrap_err();
        assert_eq!(err, AssembleError::ReservedToolName);
        root.dispose();
    }

    #[tokio::test]
    async fn two_providers_offering_one_name_fail_the_assembly_naming_it() {
        let root = Context::root();
        let sp = service(&root, None);
        let _ = sp.tools(&root, provider(&["bash", "alpha"])).unwrap();
        let _ = sp.tools(&root, provider(&["bash"])).unwrap();
        let err = sp.assemble(AssembleContext::global()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "tool \"bash\" is offered by more than one tool provider"
        );
        root.dispose();
    }

    #[tokio::test]
    async fn the_waterfall_sees_the_canonical_list_and_an_appended_tool_stays_last() {
        let root = Context::root();
        let sp = service(&root, None);
        let _ = sp.tools(&root, provider(&["zulu", "alpha"])).unwrap();
        let seen = Arc::new(StdMutex::new(Vec::new()));
        let s = seen.clone();
        let _ =
            root.on_waterfall::<SystemPromptAssemble, _, _>(Position::Back, move |mut v, next| {
                s.lock()
                    .unwrap()
                    .extend(v.assembly.tools.iter().map(|t| t.name.clone()));
                v.assembly.tools.push(schema("aardvark"));
                next.run(v)
            });
        let a = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(*seen.lock().unwrap(), ["alpha", "zulu"]);
        assert_eq!(names(&a), ["alpha", "zulu", "aardvark"]);
        root.dispose();
    }

    #[tokio::test]
    async fn a_panicking_waterfall_listener_fails_the_assembly() {
        let root = Context::root();
        let sp = service(&root, None);
        let _ = root
            .on_waterfall::<SystemPromptAssemble, _, _>(Position::Back, |_v, _next| async {
                panic!("listener broke")
            });
        let err = sp.assemble(AssembleContext::global()).await.unwrap_err();
        assert!(err.to_string().contains("listener broke"), "{err}");
        root.dispose();
    }

    #[tokio::test]
    async fn sections_sort_by_order_then_by_utf16_name_regardless_of_registration_order() {
        let root = Context::root();
        let forward = service(&root, None);
        let backward = service(&root, None);
        let sections = [
            Section::fixed("b", 1.0, "B"),
            Section::fixed("\u{FF5E}", 1.0, "Tilde"),
            Section::fixed("\u{1F600}", 1.0, "Smile"),
            Section::fixed("a", 1.0, "A"),
            Section::fixed("z", -1.0, "Z"),
            Section::dynamic("scope", 2.0, |c: &AssembleContext| format!("{:?}", c.scope)),
        ];
        for s in sections.iter().cloned() {
            let _ = forward.section(&root, s).unwrap();
        }
        for s in sections.iter().rev().cloned() {
            let _ = backward.section(&root, s).unwrap();
        }
        let a = forward.assemble(AssembleContext::global()).await.unwrap();
        let b = backward.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(a.render().unwrap(), "Z\n\nA\n\nB\n\nSmile\n\nTilde\n\nNone");
        assert_eq!(a, b);
        root.dispose();
    }

    #[tokio::test]
    async fn a_computed_section_empty_for_one_scope_is_left_out_of_that_assembly() {
        let root = Context::root();
        let sp = service(&root, None);
        let _ = sp
            .section(
                &root,
                Section::dynamic("scoped-only", 1.0, |c: &AssembleContext| {
                    c.scope.map(|k| format!("for {k}")).unwrap_or_default()
                }),
            )
            .unwrap();
        let _ = sp.section(&root, Section::fixed("empty", 0.0, "")).unwrap();
        let global = sp.assemble(AssembleContext::global()).await.unwrap();
        let names: Vec<&str> = global.sections.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["empty"], "a fixed empty section stays listed");
        let scoped = sp
            .assemble(AssembleContext::scoped(crate::ScopeKey(3)))
            .await
            .unwrap();
        assert_eq!(scoped.sections.len(), 2);
        root.dispose();
    }

    #[tokio::test]
    async fn an_unavailable_provider_fails_the_assembly_with_its_reason() {
        let root = Context::root();
        let sp = service(&root, None);
        let _ = sp
            .tools(&root, |_| ToolProviderResult {
                unavailable: Some("no runtime".into()),
                ..ToolProviderResult::default()
            })
            .unwrap();
        let err = sp.assemble(AssembleContext::global()).await.unwrap_err();
        assert_eq!(
            err,
            AssembleError::ProviderUnavailable {
                message: "no runtime".into()
            }
        );
        root.dispose();
    }

    #[tokio::test]
    async fn section_and_variable_registrations_are_validated() {
        let root = Context::root();
        let sp = service(&root, None);
        let err = sp
            .section(&root, Section::fixed("x", f64::NAN, ""))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "prompt section \"x\" order must be a finite number"
        );
        assert_eq!(
            sp.section(&root, Section::fixed("", 0.0, "")).unwrap_err(),
            RegisterError::EmptySectionName
        );
        let err = sp.variable(&root, "Model", |_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid prompt variable name \"Model\" (must match /^[a-z][a-z0-9_]*$/)"
        );
        let _ = sp.variable(&root, "model", |_| None).unwrap();
        let err = sp.variable(&root, "model", |_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "prompt variable \"model\" is already registered"
        );
        root.dispose();
    }

    #[tokio::test]
    async fn a_section_or_variable_two_scopes_register_is_withheld_until_one_leaves() {
        let root = Context::root();
        let sp = service(&root, None);
        let (one, two) = (root.child_scope("one"), root.child_scope("two"));
        let (c1, c2) = (one.context().unwrap(), two.context().unwrap());
        // In both orders of registration the outcome is the same: neither is used.
        let _ = sp.section(&c2, Section::fixed("s", 1.0, "two")).unwrap();
        let _ = sp.section(&c1, Section::fixed("s", 1.0, "one")).unwrap();
        let _ = sp.variable(&c1, "v", |_| Some("one".into())).unwrap();
        let _ = sp.variable(&c2, "v", |_| Some("two".into())).unwrap();
        let a = sp.assemble(AssembleContext::global()).await.unwrap();
        assert!(a.sections.is_empty() && a.variables.is_empty(), "{a:?}");
        assert!(root.is_contested(&Claim::new("variable", "v")));
        two.dispose();
        let a = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(a.sections[0].text, "one");
        assert_eq!(a.variables.get("v"), Some(&Some("one".to_owned())));
        root.dispose();
        assert!(root.live().is_zero());
    }

    #[tokio::test]
    async fn disposing_the_registering_scope_removes_its_sections_and_providers() {
        let root = Context::root();
        let sp = service(&root, None);
        let child = root.child_scope("plugin");
        let cctx = child.context().unwrap();
        let _ = sp.section(&cctx, Section::fixed("s", 1.0, "text")).unwrap();
        let _ = sp.tools(&cctx, provider(&["alpha"])).unwrap();
        let _ = sp.variable(&cctx, "v", |_| Some("x".into())).unwrap();
        let a = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(
            (a.sections.len(), a.tools.len(), a.variables.len()),
            (1, 1, 1)
        );
        child.dispose();
        let a = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(a, PromptAssembly::default());
        let err = sp
            .section(&cctx, Section::fixed("late", 0.0, ""))
            .unwrap_err();
        assert!(matches!(err, RegisterError::ScopeGone { .. }), "{err}");
        root.dispose();
        assert!(root.live().is_zero());
    }

    #[tokio::test]
    async fn a_panicking_provider_fails_the_assembly_instead_of_unwinding() {
        let root = Context::root();
        let sp = service(&root, None);
        let _ = sp
            .tools(&root, |_| -> ToolProviderResult {
                panic!("provider broke")
            })
            .unwrap();
        let err = sp.assemble(AssembleContext::global()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "prompt tool provider panicked during assembly: provider broke"
        );
        root.dispose();
    }
}
