//! The presenter trait and the `presenter` service.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use cordis_runtime::{Context, EffectHandle, Service};
use serde_json::Value;

use crate::card::{Card, Presentation, ResultView, ToolKind};

/// A presenter could not describe a call or result (the caller falls back to generic).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PresentError {
    /// A required argument is missing or has the wrong type.
    #[error("argument \"{0}\" is missing or not a {1}")]
    Argument(&'static str, &'static str),
    /// Registering a presenter from a scope that is gone.
    #[error("cannot register a presenter: the registering scope is no longer live")]
    ScopeGone,
}

/// Describes one tool's calls and results for people.
pub trait ToolPresenter: Send + Sync + 'static {
    /// The call, before it runs, as a transcript shows it (live and replayed alike, so it
    /// depends on the arguments alone).
    ///
    /// # Errors
    /// Arguments the presenter cannot read.
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError>;

    /// The call as an approval question shows it: by default [`ToolPresenter::present_call`];
    /// a tool that works its calls out before approval (the whole-file diff of an edit, what a
    /// mounted file starts) shows that here. Never replayed.
    ///
    /// # Errors
    /// Arguments the presenter cannot read.
    fn present_approval(&self, args: &Value) -> Result<Presentation, PresentError> {
        self.present_call(args)
    }

    /// The result, with the call's arguments.
    ///
    /// # Errors
    /// Arguments or content the presenter cannot read.
    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError>;
}

/// The generic presentation: the tool name as title, kind `other`, the arguments as input.
pub fn generic(name: &str, args: &Value) -> Presentation {
    Presentation {
        title: name.to_owned(),
        kind: ToolKind::Other,
        input: args.clone(),
        card: Card::Generic,
        text: None,
        locations: Vec::new(),
    }
}

/// A result's text: a string as is, anything else as compact JSON.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

type Entry = (u64, Arc<dyn ToolPresenter>);

/// The standard presenters by tool name, built once per process and shared by every service
/// [`Presenters::standard`] makes (each boot makes one, and `tool-fs` asks one for the
/// presenters it wraps): they are stateless, so sharing them changes nothing they present.
static STANDARD: LazyLock<BTreeMap<&'static str, Arc<dyn ToolPresenter>>> =
    LazyLock::new(|| crate::standard::presenters().into_iter().collect());

#[derive(Default)]
struct Table {
    next: u64,
    /// The presenters a name falls back to when nothing registered for it is left
    /// ([`STANDARD`] for [`Presenters::standard`]): they stand for registrations older than
    /// any in `by_name`, so the latest registration still wins and a withdrawn one uncovers
    /// them again, exactly as if they had been inserted first.
    base: Option<&'static BTreeMap<&'static str, Arc<dyn ToolPresenter>>>,
    by_name: BTreeMap<String, Vec<Entry>>,
}

/// The `presenter` service: presenters keyed by tool name; the latest registration of a name
/// wins until it is withdrawn.
#[derive(Clone, Default)]
pub struct Presenters {
    table: Arc<Mutex<Table>>,
}

impl std::fmt::Debug for Presenters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = self.table();
        let mut tools: BTreeSet<&str> = table.by_name.keys().map(String::as_str).collect();
        tools.extend(table.base.into_iter().flat_map(|base| base.keys().copied()));
        f.debug_struct("Presenters")
            .field("tools", &tools.into_iter().collect::<Vec<_>>())
            .finish()
    }
}

impl Service for Presenters {
    const NAME: &'static str = "presenter";
}

impl Presenters {
    fn table(&self) -> MutexGuard<'_, Table> {
        // Only bookkeeping runs under this lock; presenters run outside it.
        cordis_runtime::lock(&self.table)
    }

    fn insert(&self, name: &str, presenter: Arc<dyn ToolPresenter>) -> u64 {
        let mut table = self.table();
        table.next += 1;
        let id = table.next;
        // The key is copied only for a name with no registration yet.
        match table.by_name.get_mut(name) {
            Some(list) => list.push((id, presenter)),
            None => {
                table.by_name.insert(name.to_owned(), vec![(id, presenter)]);
            }
        }
        id
    }

    /// The presenters of the standard workspace tools (`bash`, `edit_file`, `grep`, `list_files`,
    /// `read_file`, `write_file`), of `todo_write` and of `run_code`.
    pub fn standard() -> Self {
        Presenters {
            table: Arc::new(Mutex::new(Table {
                base: Some(&STANDARD),
                ..Table::default()
            })),
        }
    }

    /// Registers `presenter` for tool `name` as an effect of `ctx`'s scope.
    ///
    /// # Errors
    /// [`PresentError::ScopeGone`] when `ctx` is no longer live.
    pub fn register(
        &self,
        ctx: &Context,
        name: &str,
        presenter: Arc<dyn ToolPresenter>,
    ) -> Result<EffectHandle, PresentError> {
        if !ctx.is_live() {
            return Err(PresentError::ScopeGone);
        }
        let id = self.insert(name, presenter);
        let weak: Weak<Mutex<Table>> = Arc::downgrade(&self.table);
        let name = name.to_owned();
        Ok(ctx.effect(format!("presenter {name}"), move || {
            let Some(table) = weak.upgrade() else {
                return;
            };
            let mut table = cordis_runtime::lock(&table);
            if let Some(list) = table.by_name.get_mut(&name) {
                list.retain(|(i, _)| *i != id);
                if list.is_empty() {
                    table.by_name.remove(&name);
                }
            }
        }))
    }

    /// The presenter for `name`, if any.
    pub fn get(&self, name: &str) -> Option<Arc<dyn ToolPresenter>> {
        let table = self.table();
        match table.by_name.get(name).and_then(|list| list.last()) {
            Some((_, p)) => Some(p.clone()),
            None => table.base.and_then(|base| base.get(name)).cloned(),
        }
    }

    /// The call of `name` with `args`; generic when there is no presenter or it fails.
    pub fn present_call(&self, name: &str, args: &Value) -> Presentation {
        self.present_with(name, args, |p| p.present_call(args))
    }

    /// The call of `name` with `args` as an approval question shows it; generic when there is
    /// no presenter or it fails.
    pub fn present_approval(&self, name: &str, args: &Value) -> Presentation {
        self.present_with(name, args, |p| p.present_approval(args))
    }

    /// What `present` makes of `name`'s presenter; generic when there is none, or it fails or
    /// panics.
    fn present_with(
        &self,
        name: &str,
        args: &Value,
        present: impl FnOnce(&dyn ToolPresenter) -> Result<Presentation, PresentError>,
    ) -> Presentation {
        let Some(presenter) = self.get(name) else {
            return generic(name, args);
        };
        match catch_unwind(AssertUnwindSafe(|| present(presenter.as_ref()))) {
            Ok(Ok(p)) => p,
            _ => generic(name, args),
        }
    }

    /// The result of `name`; generic (with the content as text) when there is no presenter
    /// or it fails.
    pub fn present_result(&self, name: &str, args: &Value, result: ResultView<'_>) -> Presentation {
        let fallback = || Presentation {
            text: Some(content_text(result.content)),
            ..generic(name, args)
        };
        let Some(presenter) = self.get(name) else {
            return fallback();
        };
        match catch_unwind(AssertUnwindSafe(|| presenter.present_result(args, result))) {
            Ok(Ok(p)) => p,
            _ => fallback(),
        }
    }
}
