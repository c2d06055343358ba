//! The host side of agent presets: a [`Composer`] that reads a preset's composition with the
//! host's plan resolution (the same errors `cordis check` reports) and mounts its rows under a
//! standing scope the way the loader boots a file.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use cordis_agent_presets::{Composer, Composition, RowInfo, RowReport, RowStatus};
use cordis_host::include::IncludedFiles;
use cordis_host::plan::{LoadPlan, PlanOptions, Step, load_with};
use cordis_host::{Builtins, EntryStatus};
use cordis_runtime::{Context, ScopeHandle, ScopeStatus};

/// Resolves compositions against a plugin table (the standard one unless given).
pub struct HostComposer {
    table: OnceLock<Builtins>,
    options: PlanOptions,
}

impl std::fmt::Debug for HostComposer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostComposer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl HostComposer {
    /// Over the standard table (built on first use: the table holds this composer).
    pub fn standard() -> Self {
        HostComposer {
            table: OnceLock::new(),
            options: PlanOptions::default(),
        }
    }

    /// Over `table`, with the timeouts and plugin directories of `options` (each composition
    /// resolves relative paths against its own directory).
    pub fn with_table(table: Builtins, options: PlanOptions) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(table);
        HostComposer {
            table: cell,
            options,
        }
    }

    fn table(&self) -> &Builtins {
        self.table.get_or_init(super::standard)
    }
}

impl Composer for HostComposer {
    fn prepare(&self, file: &Path) -> Result<Arc<dyn Composition>, String> {
        let (plan, files) = self.plan(file)?;
        Ok(Arc::new(HostComposition { plan, files }))
    }
}

impl HostComposer {
    /// Reads and resolves the composition at `file` (as [`Composer::prepare`] does): its plan,
    /// and every file it was read from.
    ///
    /// # Errors
    /// Why the file is unusable, as one text for a person.
    pub fn plan(&self, file: &Path) -> Result<(LoadPlan, Vec<PathBuf>), String> {
        let source = cordis_host::include::read_regular(file, 1 << 20)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let name = file.display().to_string();
        let options = PlanOptions {
            config_dir: Some(
                file.parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map_or_else(|| PathBuf::from("."), Path::to_owned),
            ),
            ..self.options.clone()
        };
        // A preset reads the process environment for `${{ env.NAME }}`, as the host file does.
        let env = |k: &str| std::env::var(k).ok();
        // Included files are read as the plan goes; their paths join the stamp, so editing
        // an included file (the `standard` a preset includes) starts a new generation too.
        let mut included = IncludedFiles::disk(options.config_dir_for(&name));
        let (_, plan) = load_with(&source, &name, &env, self.table(), &options, &mut included)
            .map_err(|errors| errors.to_string())?;
        let mut files = vec![file.to_owned()];
        files.extend(included.paths().into_iter().filter(|p| p != file));
        Ok((plan, files))
    }
}

/// A resolved preset composition.
struct HostComposition {
    plan: LoadPlan,
    /// The composition file, then every file it includes.
    files: Vec<PathBuf>,
}

impl Composition for HostComposition {
    fn rows(&self) -> Vec<RowInfo> {
        self.plan
            .entries
            .iter()
            .filter_map(|e| match &e.step {
                Step::Plugin { prepared, .. } => {
                    let mut provides = prepared.plugin.provides_erased(&*prepared.config);
                    provides.sort();
                    Some(RowInfo {
                        id: e.id.clone(),
                        name: e.name.clone(),
                        provides,
                        starts: prepared.plugin.starts_erased(&*prepared.config),
                    })
                }
                Step::Group | Step::Disabled => None,
            })
            .collect()
    }

    fn files(&self) -> Vec<PathBuf> {
        self.files.clone()
    }

    fn mount<'a>(
        &'a self,
        under: &'a Context,
    ) -> Pin<Box<dyn Future<Output = Vec<RowReport>> + Send + 'a>> {
        Box::pin(mount(&self.plan, under))
    }
}

/// Applies the plan's rows under `under` as the loader boots a file ([`cordis_host::start_under`])
/// and waits until none is loading; rows report as the loader's entries do.
async fn mount(plan: &LoadPlan, under: &Context) -> Vec<RowReport> {
    let handles = cordis_host::start_under(under, plan).await;
    // A row may load more under itself after it is active (`tool-presentation` waits for the
    // code runtime in a child): wait until nothing of the runtime is loading. A row that
    // becomes active may provide what an earlier, settled row waits for: repeat until one pass
    // finds nothing loading.
    under.idle().await;
    loop {
        let mut loading = false;
        for handle in handles.iter().flatten() {
            if handle.status() == ScopeStatus::Loading {
                loading = true;
                handle.settled().await;
            }
        }
        if !loading {
            break;
        }
    }
    plan.entries
        .iter()
        .zip(&handles)
        .filter(|(e, _)| !matches!(e.step, Step::Group))
        .map(|(entry, handle)| {
            let report = cordis_host::entry_report(entry, handle.as_ref());
            RowReport {
                status: row_status(report.status),
                reason: report.error,
                id: report.id,
                name: report.name,
                scope: handle.as_ref().map(ScopeHandle::id),
            }
        })
        .collect()
}

/// The row status of a loader status.
fn row_status(status: EntryStatus) -> RowStatus {
    match status {
        EntryStatus::Pending => RowStatus::Pending,
        EntryStatus::Loading => RowStatus::Loading,
        EntryStatus::Active => RowStatus::Active,
        EntryStatus::Failed => RowStatus::Failed,
        EntryStatus::Disposed => RowStatus::Disposed,
        EntryStatus::Conflict => RowStatus::Conflict,
        EntryStatus::Disabled => RowStatus::Disabled,
    }
}
