//! Hot reload: bring a running host to a new version of its `cordis.yml` without a restart.
//!
//! A reload reconciles by entry id. Each entry has a *fingerprint*: the sha256 of its definition
//! (plugin name, config after interpolation, `disabled`, `inject`, `timeout`, and its enclosing
//! group's fingerprint). An entry whose fingerprint is unchanged keeps its scope (same scope id,
//! not restarted); a removed or disabled entry is disposed; a new or re-enabled one is loaded; a
//! changed one is disposed and loaded again with the **new** definition. An invalid file changes
//! nothing: the last good configuration keeps running.
//!
//! Reloads are serialized and each waits until the runtime is idle, and every reload reconciles
//! against a whole file, never a diff of edits, so an edit that arrives while entries are still
//! loading cannot be lost: after the last reload settles, the live state is that of the last
//! file.
//!
//! Each boot and reload runs its whole plan load (the file, the files it includes
//! ([`crate::include`]), resolution) once, on one blocking thread, so no file is read on a
//! runtime thread and none twice; the environment is still read on the caller's task. An edit
//! of an included file is picked up by the next reload of the same top-level text
//! ([`crate::watch::ConfigWatcher`] reports such edits), and the files that load reached are
//! the live configuration's [`LiveConfig::included_files`].
//!
//! # Determinism
//! Disposal runs in reverse file order and loading in file order (groups first), so a reload
//! under a seeded schedule replays like a boot.

use std::collections::BTreeMap;

use cordis_runtime::{ConfigReloaded, Context, ScopeHandle, ScopeStatus};
use serde_json::json;

use crate::builtins::Builtins;
use crate::config::RawEntry;
use crate::diagnostic::{ConfigErrors, Diagnostic, Problem};
use crate::digest::digest;
use crate::include::IncludedFiles;
use crate::loader::{BootReport, report, start_entries};
use crate::plan::{LoadPlan, PlanOptions};

/// A configuration loaded into a runtime, ready to be reloaded.
pub struct LiveConfig {
    root: Context,
    builtins: Builtins,
    options: PlanOptions,
    file: String,
    plan: LoadPlan,
    /// Per plan entry: its fingerprint.
    fingerprints: Vec<String>,
    /// Per plan entry: its live scope (`None` when disabled).
    handles: Vec<Option<ScopeHandle>>,
    reloads: u64,
    /// The files the live configuration includes, as reached.
    included: Vec<std::path::PathBuf>,
    /// Whether a reload may widen permissions (only where no session runs: `check --watch`).
    widening_allowed: bool,
}

/// A configuration read and resolved, not yet applied.
pub struct Resolved {
    plan: LoadPlan,
    fingerprints: Vec<String>,
    included: Vec<std::path::PathBuf>,
}

impl Resolved {
    /// The resolved plan.
    pub fn plan(&self) -> &LoadPlan {
        &self.plan
    }
}

/// What one reload changed, by entry id (each list sorted).
pub type ReloadSummary = ConfigReloaded;

/// Reads and resolves `source`, with every entry's definition fingerprint in plan order (the
/// library bytes of dylib entries are added by [`with_library_hashes`], off the async threads).
fn load(
    source: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
    builtins: &Builtins,
    options: &PlanOptions,
    files: &mut IncludedFiles,
) -> Result<(LoadPlan, Vec<String>), ConfigErrors> {
    let (raw, plan) = crate::plan::load_with(source, file, env, builtins, options, files)?;
    let mut by_id = BTreeMap::new();
    fingerprint_all(&raw.entries, "", &mut by_id);
    let fingerprints = plan
        .entries
        .iter()
        .map(|e| by_id.get(&e.id).cloned().unwrap_or_default())
        .collect();
    Ok((plan, fingerprints))
}

/// A name the load asks the environment for, and where to send the answer.
type EnvQuestion = (String, std::sync::mpsc::SyncSender<Option<String>>);

/// `load` run whole (the file, its includes, resolution) on one blocking thread, returning
/// the files it included as well. `env` is called here, on the caller's task, for each
/// variable the load asks for (in the order it asks), so it need not be `'static` or `Send`.
pub async fn load_blocking(
    source: &str,
    file: &str,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
    builtins: &Builtins,
    options: &PlanOptions,
) -> Result<Resolved, ConfigErrors> {
    let (ask, mut asked) = tokio::sync::mpsc::unbounded_channel::<EnvQuestion>();
    let (source, file) = (source.to_owned(), file.to_owned());
    let (builtins, options) = (builtins.clone(), options.clone());
    let mut task = tokio::task::spawn_blocking(move || {
        let env = |name: &str| {
            let (reply, answer) = std::sync::mpsc::sync_channel(1);
            ask.send((name.to_owned(), reply)).ok()?;
            answer.recv().ok().flatten()
        };
        let mut files = IncludedFiles::disk(options.config_dir_for(&file));
        let (plan, fingerprints) = load(&source, &file, &env, &builtins, &options, &mut files)?;
        Ok(Resolved {
            plan,
            fingerprints,
            included: files.paths(),
        })
    });
    loop {
        tokio::select! {
            Some((name, reply)) = asked.recv() => {
                // The load waits for the answer; it is gone only if the load is.
                let _ = reply.send(env(&name));
            }
            done = &mut task => {
                return done.unwrap_or_else(|e| match e.try_into_panic() {
                    Ok(panic) => std::panic::resume_unwind(panic),
                    Err(e) => panic!("the configuration load did not finish: {e}"),
                });
            }
        }
    }
}

/// A dylib entry also changes when its library's bytes do (it is then loaded again from a new
/// content-addressed copy): folds each library's hash into its entry's fingerprint, reading the
/// files on blocking threads. An unreadable library keeps an empty hash: loading it will fail
/// the entry with the reason.
async fn with_library_hashes(plan: &LoadPlan, mut fingerprints: Vec<String>) -> Vec<String> {
    for (entry, fp) in plan.entries.iter().zip(fingerprints.iter_mut()) {
        let Some(path) = entry.library.clone() else {
            continue;
        };
        let bytes = tokio::task::spawn_blocking(move || {
            crate::dylib::file_sha256(&path).unwrap_or_default()
        })
        .await
        .unwrap_or_default();
        *fp = digest(&json!({"entry": fp, "library": crate::digest::sha256_hex(&bytes)}));
    }
    fingerprints
}

/// What going from `old` to `new` would let happen without a question that did not before, as
/// diagnostics naming the entry (where it is in `new`, or in `old` for one removed), each plugin
/// judging its own entries ([`cordis_runtime::Plugin::widens`]).
///
/// Entries are matched by id; an entry removed and another of the same plugin added are
/// compared with each other (in file order), so renaming an entry is no way around its rules.
pub fn widenings(old: &LoadPlan, new: &LoadPlan) -> Vec<Diagnostic> {
    use crate::plan::{PlannedEntry, Step};
    let prepared = |e: &PlannedEntry| match &e.step {
        Step::Plugin { prepared, .. } => Some(prepared.clone()),
        _ => None,
    };
    let live = |plan: &LoadPlan| -> Vec<(usize, cordis_runtime::Prepared)> {
        plan.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| prepared(e).map(|p| (i, p)))
            .collect()
    };
    let (before, after) = (live(old), live(new));
    let same = |a: &PlannedEntry,
                pa: &cordis_runtime::Prepared,
                b: &PlannedEntry,
                pb: &cordis_runtime::Prepared| {
        a.id == b.id && pa.plugin.name() == pb.plugin.name()
    };
    let mut out = Vec::new();
    let mut say = |entry: &PlannedEntry, lines: Vec<String>| {
        out.extend(lines.into_iter().map(|what| Diagnostic {
            file: entry.file.clone(),
            pos: entry.pos,
            entry: Some(entry.id.clone()),
            problem: Problem::Widens { what },
        }));
    };
    let mut removed: Vec<&(usize, cordis_runtime::Prepared)> = before
        .iter()
        .filter(|(i, p)| {
            !after
                .iter()
                .any(|(j, q)| same(&old.entries[*i], p, &new.entries[*j], q))
        })
        .collect();
    for (j, q) in &after {
        let b = &new.entries[*j];
        let kept = before.iter().find(|(i, p)| same(&old.entries[*i], p, b, q));
        let paired = kept.or_else(|| {
            let at = removed
                .iter()
                .position(|(_, p)| p.plugin.name() == q.plugin.name())?;
            Some(removed.remove(at))
        });
        let lines = q
            .plugin
            .widens_erased(paired.map(|(_, p)| &*p.config), Some(&*q.config));
        say(b, lines);
    }
    for (i, p) in removed {
        say(
            &old.entries[*i],
            p.plugin.widens_erased(Some(&*p.config), None),
        );
    }
    out
}

fn fingerprint_all(entries: &[RawEntry], parent: &str, out: &mut BTreeMap<String, String>) {
    for e in entries {
        let fp = digest(&json!({
            "name": e.name,
            "config": if e.is_group { serde_json::Value::Null } else { e.config.clone().unwrap_or_default() },
            "disabled": e.disabled,
            "inject": e.inject,
            "timeout_ms": e.timeout_ms,
            "sha256": e.sha256,
            "group": e.is_group,
            "parent": parent,
        }));
        fingerprint_all(&e.children, &fp, out);
        out.insert(e.id.clone(), fp);
    }
}

impl LiveConfig {
    /// Resolves `source` and boots it under `root`.
    ///
    /// # Errors
    /// Every configuration error of the file; nothing is loaded then.
    ///
    /// # Cancel safety
    /// Not cancel safe once the file is resolved: dropping the future after the entries have
    /// started leaves them running under `root` with no [`LiveConfig`] to reconcile them (dispose
    /// `root` to unwind them). Dropped while the file is still being read and resolved, it
    /// changes nothing: the blocking thread's result is thrown away.
    pub async fn boot(
        root: Context,
        source: &str,
        file: &str,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
        builtins: Builtins,
        options: PlanOptions,
    ) -> Result<(LiveConfig, BootReport), ConfigErrors> {
        let Resolved {
            plan,
            fingerprints,
            included,
        } = load_blocking(source, file, env, &builtins, &options).await?;
        let fingerprints = with_library_hashes(&plan, fingerprints).await;
        let started = std::time::Instant::now();
        let mut handles = vec![None; plan.entries.len()];
        start_entries(&root, &plan, &mut handles);
        root.idle().await;
        let boot = report(&root, &plan, &handles, started.elapsed()).await;
        let live = LiveConfig {
            root,
            builtins,
            options,
            file: file.to_owned(),
            plan,
            fingerprints,
            handles,
            reloads: 0,
            included,
            widening_allowed: false,
        };
        Ok((live, boot))
    }

    /// Reads and resolves `source` against this host's plugin table, without touching the
    /// running configuration. Included files are read on this thread: async code uses
    /// [`LiveConfig::read`].
    ///
    /// # Errors
    /// Every configuration error of `source`.
    pub fn prepare(
        &self,
        source: &str,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<Resolved, ConfigErrors> {
        let mut files = IncludedFiles::disk(self.options.config_dir_for(&self.file));
        let (plan, fingerprints) = load(
            source,
            &self.file,
            env,
            &self.builtins,
            &self.options,
            &mut files,
        )?;
        Ok(Resolved {
            plan,
            fingerprints,
            included: files.paths(),
        })
    }

    /// [`LiveConfig::prepare`] run whole (file, includes, resolution) on one blocking thread;
    /// `env` is still called on this task.
    ///
    /// # Errors
    /// Every configuration error of `source`.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing changes until [`LiveConfig::apply`].
    pub async fn read(
        &self,
        source: &str,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<Resolved, ConfigErrors> {
        load_blocking(source, &self.file, env, &self.builtins, &self.options).await
    }

    /// Reconciles the live entries with `source` (and the files it includes, read again) and
    /// waits until the runtime is idle.
    ///
    /// Emits [`ConfigReloaded`] on the root scope after a successful reload.
    ///
    /// # Errors
    /// Every configuration error of the new file; the running configuration is untouched.
    ///
    /// # Cancel safety
    /// Not cancel safe: cancelling between disposal and loading leaves entries missing until
    /// the next reload.
    pub async fn reload(
        &mut self,
        source: &str,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<ReloadSummary, ConfigErrors> {
        let resolved = self.read(source, env).await?;
        if !self.widening_allowed {
            let widens = widenings(&self.plan, &resolved.plan);
            if !widens.is_empty() {
                return Err(ConfigErrors(widens));
            }
        }
        Ok(self.apply(resolved).await)
    }

    /// Lets reloads widen permissions (a new permission mode, allow rules, a sandbox, a server
    /// to start): for a host where no session runs, such as `cordis check --watch`. Otherwise a
    /// reload that widens anything ([`widenings`]) is refused, naming each widening.
    pub fn allow_widening(&mut self) {
        self.widening_allowed = true;
    }

    /// Reconciles the live entries with a resolved configuration (see [`LiveConfig::reload`]).
    ///
    /// # Cancel safety
    /// Not cancel safe.
    pub async fn apply(&mut self, resolved: Resolved) -> ReloadSummary {
        let Resolved {
            plan,
            fingerprints,
            included,
        } = resolved;
        let fingerprints = with_library_hashes(&plan, fingerprints).await;
        let old: BTreeMap<&str, (&str, Option<&ScopeHandle>)> = self
            .plan
            .entries
            .iter()
            .zip(&self.fingerprints)
            .zip(&self.handles)
            .map(|((e, fp), h)| (e.id.as_str(), (fp.as_str(), h.as_ref())))
            .collect();
        let new: BTreeMap<&str, &str> = plan
            .entries
            .iter()
            .zip(&fingerprints)
            .map(|(e, fp)| (e.id.as_str(), fp.as_str()))
            .collect();
        let enabled_new: BTreeMap<&str, bool> = plan
            .entries
            .iter()
            .map(|e| {
                (
                    e.id.as_str(),
                    !matches!(e.step, crate::plan::Step::Disabled),
                )
            })
            .collect();

        let mut summary = ReloadSummary::default();
        // Dispose what changed or went away, children before their groups.
        for ((entry, fp), handle) in self
            .plan
            .entries
            .iter()
            .zip(&self.fingerprints)
            .zip(&self.handles)
            .rev()
        {
            let Some(handle) = handle else { continue };
            match new.get(entry.id.as_str()) {
                Some(new_fp) if new_fp == fp => {}
                Some(_) if enabled_new[entry.id.as_str()] => {
                    summary.restarted.push(entry.id.clone());
                    handle.dispose();
                }
                _ => {
                    summary.removed.push(entry.id.clone());
                    handle.dispose();
                }
            }
        }
        let mut handles: Vec<Option<ScopeHandle>> = plan
            .entries
            .iter()
            .zip(&fingerprints)
            .map(|(e, fp)| match old.get(e.id.as_str()) {
                Some((old_fp, Some(h))) if old_fp == fp => Some((*h).clone()),
                _ => None,
            })
            .collect();
        for (e, h) in plan.entries.iter().zip(&handles) {
            let was_live = matches!(old.get(e.id.as_str()), Some((_, Some(_))));
            if h.is_none() && enabled_new[e.id.as_str()] && !was_live {
                summary.added.push(e.id.clone());
            }
        }
        start_entries(&self.root, &plan, &mut handles);
        self.root.idle().await;
        for (e, h) in plan.entries.iter().zip(&handles) {
            if let Some(h) = h
                && h.status() != ScopeStatus::Active
            {
                summary.failed.push(e.id.clone());
            }
        }
        self.plan = plan;
        self.fingerprints = fingerprints;
        self.handles = handles;
        self.included = included;
        self.reloads += 1;
        summary.number = self.reloads;
        for list in [
            &mut summary.added,
            &mut summary.removed,
            &mut summary.restarted,
            &mut summary.failed,
        ] {
            list.sort();
        }
        self.root.emit(summary.clone());
        summary
    }

    /// A report on the live entries, as `check` prints it.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads the live entries and the assembled request.
    pub async fn report(&self) -> BootReport {
        report(
            &self.root,
            &self.plan,
            &self.handles,
            std::time::Duration::ZERO,
        )
        .await
    }

    /// The scope id of the live entry `id` (`None` if absent or disabled).
    pub fn scope_id(&self, id: &str) -> Option<cordis_runtime::ScopeId> {
        self.plan
            .entries
            .iter()
            .zip(&self.handles)
            .find(|(e, _)| e.id == id)
            .and_then(|(_, h)| h.as_ref().map(ScopeHandle::id))
    }

    /// The fingerprints of the live configuration by entry id, for comparing two hosts.
    pub fn fingerprints(&self) -> BTreeMap<String, String> {
        self.plan
            .entries
            .iter()
            .zip(&self.fingerprints)
            .map(|(e, fp)| (e.id.clone(), fp.clone()))
            .collect()
    }

    /// Every file the live configuration includes, as reached from the current directory
    /// (the directory joined with each include's `path`), sorted.
    pub fn included_files(&self) -> &[std::path::PathBuf] {
        &self.included
    }

    /// The plan of the live configuration (its entries in file order).
    pub fn plan(&self) -> &LoadPlan {
        &self.plan
    }

    /// The root context.
    pub fn root(&self) -> &Context {
        &self.root
    }
}

/// One line for people: `reload 3: added a; removed -; restarted b, c; failed -`.
pub fn summary_line(s: &ReloadSummary) -> String {
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_owned()
        } else {
            v.join(", ")
        }
    };
    format!(
        "reload {}: added {}; removed {}; restarted {}; failed {}",
        s.number,
        list(&s.added),
        list(&s.removed),
        list(&s.restarted),
        list(&s.failed)
    )
}

/// Reloads `live` with the sources `sources` delivers, one reload at a time, until the sender is
/// dropped; returns `live`.
///
/// Sources that queue up while a reload runs are taken together: the last *valid* one is
/// applied (the ones before it are superseded), so no valid edit is ever lost to a later invalid
/// one; if the very last source is invalid its errors are reported and the state stays at the
/// last valid source. `on_result` sees each outcome.
///
/// # Cancel safety
/// Not cancel safe (see [`LiveConfig::reload`]).
pub async fn follow(
    mut live: LiveConfig,
    mut sources: tokio::sync::mpsc::UnboundedReceiver<String>,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
    mut on_result: impl FnMut(Result<&ReloadSummary, &ConfigErrors>, &LiveConfig),
) -> LiveConfig {
    while let Some(first) = sources.recv().await {
        let mut batch = vec![first];
        while let Ok(next) = sources.try_recv() {
            batch.push(next);
        }
        let mut last_error = None;
        let mut chosen = None;
        for (i, source) in batch.iter().enumerate().rev() {
            match live.read(source, env).await {
                Ok(resolved) => {
                    chosen = Some(resolved);
                    break;
                }
                Err(errors) if i + 1 == batch.len() => last_error = Some(errors),
                Err(_) => {}
            }
        }
        if let Some(resolved) = chosen {
            let summary = live.apply(resolved).await;
            on_result(Ok(&summary), &live);
        }
        if let Some(errors) = last_error {
            on_result(Err(&errors), &live);
        }
    }
    live
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::load_plan;

    /// Regression (issue 12): reload had its own plan loading that listed parse problems
    /// before resolution problems instead of in file order as `check` does.
    #[tokio::test]
    async fn a_rejected_reload_reports_what_check_reports_in_the_same_order() {
        let good = "- id: a\n  name: debug/noop\n";
        let (live, _) = LiveConfig::boot(
            Context::root(),
            good,
            "c.yml",
            &|_| None,
            Builtins::host(),
            PlanOptions::default(),
        )
        .await
        .unwrap();
        let bad = "- id: a\n  name: debug/nope\n- id: b\n  name: debug/noop\n  colour: red\n";
        let check = load_plan(
            bad,
            "c.yml",
            &|_| None,
            &Builtins::host(),
            &PlanOptions::default(),
        )
        .unwrap_err()
        .to_string();
        let reload = live.prepare(bad, &|_| None).err().unwrap().to_string();
        assert_eq!(reload, check);
        assert!(
            check.starts_with("c.yml:2:9: entry \"a\": unknown plugin"),
            "{check}"
        );
        live.root().dispose();
    }

    /// Issue 14: an edit of an included file reaches the live configuration on the next
    /// reload of the unchanged top-level file; only the edited entry restarts.
    #[tokio::test]
    async fn a_reload_reads_included_files_again() {
        let dir =
            std::env::temp_dir().join(format!("cordis-reload-include-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("parts")).unwrap();
        let file = dir.join("a.yml").display().to_string();
        let top = "- id: own\n  name: debug/noop\n- id: inc\n  name: cordis/include\n  config: {path: parts/b.yml}\n";
        std::fs::write(&file, top).unwrap();
        let b = "- id: x\n  name: debug/fault\n  config: {mode: ok, note: v1}\n- id: y\n  name: debug/noop\n";
        std::fs::write(dir.join("parts/b.yml"), b).unwrap();
        let (mut live, report) = LiveConfig::boot(
            Context::root(),
            top,
            &file,
            &|_| None,
            Builtins::host(),
            PlanOptions::default(),
        )
        .await
        .unwrap();
        assert!(report.all_active());
        assert_eq!(live.included_files(), [dir.join("parts/b.yml")]);
        let y = live.scope_id("y");
        std::fs::write(dir.join("parts/b.yml"), b.replace("v1", "v2")).unwrap();
        let summary = live.reload(top, &|_| None).await.unwrap();
        assert_eq!(summary.restarted, ["x"]);
        assert!(summary.added.is_empty() && summary.removed.is_empty());
        assert_eq!(
            live.scope_id("y"),
            y,
            "an unchanged included entry keeps its scope"
        );
        // A broken included file is rejected with its chain; the last good config runs on.
        std::fs::write(dir.join("parts/b.yml"), "- id: x\n  name: debug/nope\n").unwrap();
        let errors = live.reload(top, &|_| None).await.unwrap_err().to_string();
        assert!(
            errors.starts_with(&format!(
                "{file}:3:1 → {}:2:9: entry \"x\": unknown plugin",
                dir.join("parts/b.yml").display()
            )),
            "{errors}"
        );
        assert_eq!(live.scope_id("y"), y);
        live.root().dispose();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
