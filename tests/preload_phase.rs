//! The loader's preload phase: every entry's preload finishes (or times out) before any apply,
//! whether it is done at its first poll or waits on something first (the loader polls each
//! once and puts only the still-running ones under their timeouts).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordis_host::boot_blocking;
use cordis_host::plan::{PlanOptions, load_plan};
use cordis_host::{Builtins, loader::EntryStatus};
use cordis_runtime::prelude::*;
use cordis_runtime::{Policy, Schedule};

/// How a [`Preloads`] plugin's preload behaves.
#[derive(Clone, Copy)]
enum Mode {
    /// Notes the runtime at its first poll.
    AtOnce,
    /// Waits on a timer, then notes the runtime.
    AfterAWait,
    /// Never finishes: the entry's timeout drops it.
    Never,
}

/// A plugin whose apply fails unless its own preload noted the runtime first.
struct Preloads {
    name: &'static str,
    mode: Mode,
    done: Arc<Mutex<BTreeSet<(&'static str, u64)>>>,
}

impl Plugin for Preloads {
    type Config = ();

    fn name(&self) -> &str {
        self.name
    }

    async fn preload(&self, root: &Context, (): &()) {
        match self.mode {
            Mode::AtOnce => {}
            Mode::AfterAWait => tokio::time::sleep(Duration::from_millis(5)).await,
            Mode::Never => std::future::pending::<()>().await,
        }
        self.done
            .lock()
            .unwrap()
            .insert((self.name, root.runtime_id()));
    }

    async fn apply(&self, ctx: Context, (): &()) -> Result<(), BoxError> {
        match self.mode {
            Mode::Never => Ok(()),
            _ if self
                .done
                .lock()
                .unwrap()
                .contains(&(self.name, ctx.runtime_id())) =>
            {
                Ok(())
            }
            _ => Err(format!("{}: applied before its preload finished", self.name).into()),
        }
    }
}

#[test]
fn every_preload_finishes_before_the_applies_whether_it_waits_or_not() {
    let done = Arc::new(Mutex::new(BTreeSet::new()));
    let mut builtins = Builtins::new();
    for (name, mode) in [
        ("at-once", Mode::AtOnce),
        ("after-a-wait", Mode::AfterAWait),
        ("never", Mode::Never),
    ] {
        builtins.insert(Preloads {
            name,
            mode,
            done: done.clone(),
        });
    }
    let yml = "- id: a\n  name: at-once\n- id: w\n  name: after-a-wait\n\
               - id: n\n  name: never\n  timeout: 50\n- id: w2\n  name: after-a-wait\n";
    let plan = load_plan(
        yml,
        "preloads.yml",
        &|_| None,
        &builtins,
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (policy, seed) in [(Policy::Fifo, 0), (Policy::Random, 1), (Policy::Random, 2)] {
        let (report, live) = boot_blocking(&plan, Schedule::new(policy, seed)).unwrap();
        for entry in &report.entries {
            assert_eq!(
                entry.status,
                EntryStatus::Active,
                "{policy} seed {seed}: {} {:?}",
                entry.id,
                entry.error
            );
        }
        assert!(live.is_zero(), "{live:?}");
    }
}
