//! Cross-module runtime behaviour through the facade: a composed load on both runtime flavours.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cordis::runtime::prelude::*;
use cordis::runtime::{FnPlugin, Policy, Schedule};

struct Registry(AtomicUsize);
impl Service for Registry {
    const NAME: &'static str = "registry";
}

struct Changed;
impl Event for Changed {
    const NAME: &'static str = "registry/change";
    type Output = ();
}

/// A provider, 50 dependents that register a listener and a task each, one that fails and one
/// that panics: after the load every healthy scope is active; after root disposal nothing lives.
async fn composed_load(schedule: Schedule) {
    let root = Context::root_with(schedule);
    let mut dependents = Vec::new();
    for i in 0..50u32 {
        let h = root.plugin(
            FnPlugin::new("dependent", |ctx: Context, i: u32| async move {
                let reg = ctx.require::<Registry>()?;
                reg.0.fetch_add(1, Ordering::SeqCst);
                let undo_reg = reg.clone();
                let _ = ctx.effect("unregister", move || {
                    undo_reg.0.fetch_sub(1, Ordering::SeqCst);
                });
                let _ = ctx.on::<Changed>(|_| {});
                let _ = ctx.spawn(std::future::pending());
                ctx.schedule().point("after-register").await;
                ctx.emit(Changed);
                if i == 7 {
                    return Err("entry 7 refuses".into());
                }
                if i == 8 {
                    panic!("entry 8 panics");
                }
                Ok(())
            })
            .inject(Inject::required("registry")),
            i,
        );
        dependents.push(h);
    }
    let provider = root.plugin_fn(
        "registry",
        |ctx, _: ()| async move {
            ctx.provide(Registry(AtomicUsize::new(0)))?;
            Ok(())
        },
        (),
    );
    root.idle().await;
    assert_eq!(provider.status(), ScopeStatus::Active);
    for (i, h) in dependents.iter().enumerate() {
        let expected = if i == 7 || i == 8 {
            ScopeStatus::Failed
        } else {
            ScopeStatus::Active
        };
        assert_eq!(h.status(), expected, "dependent {i}");
    }
    let reg = root.get::<Registry>().unwrap();
    assert_eq!(
        reg.0.load(Ordering::SeqCst),
        48,
        "failed applies unwound their registration"
    );
    assert_eq!(root.live().listeners, 48);
    // Task effects are bookkept synchronously; the futures of aborted tasks are dropped by a
    // worker later, which `tasks_finished` waits for at the end.
    let task_effects: usize = dependents.iter().map(|h| h.info().effects.tasks).sum();
    assert_eq!(task_effects, 48);

    provider.dispose();
    assert_eq!(
        reg.0.load(Ordering::SeqCst),
        0,
        "dependents went back to pending"
    );
    assert!(
        dependents
            .iter()
            .all(|h| h.status() == ScopeStatus::Pending)
    );
    assert_eq!(root.live().listeners, 0);

    root.dispose();
    root.tasks_finished().await;
    assert!(root.live().is_zero(), "{:?}", root.live());
}

#[test]
fn a_composed_load_on_the_current_thread_runtime_leaves_nothing_behind() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for seed in 0..20 {
        rt.block_on(composed_load(Schedule::new(Policy::Random, seed)));
    }
    rt.block_on(composed_load(Schedule::new(Policy::Pct { depth: 3 }, 1)));
}

#[test]
fn a_composed_load_on_the_multi_thread_runtime_leaves_nothing_behind() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for seed in 0..20 {
        rt.block_on(composed_load(Schedule::new(Policy::Random, seed)));
    }
}

#[test]
fn the_same_seed_applies_in_the_same_order_and_others_differ() {
    fn order(seed: u64) -> Vec<String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let root = Context::root_with(Schedule::new(Policy::Random, seed));
            for i in 0..8u32 {
                let _ = root.plugin_fn(&format!("p{i}"), |_, _: ()| async { Ok(()) }, ());
            }
            root.idle().await;
            let trace = root.trace_events();
            root.dispose();
            trace.into_iter().map(|t| t.label.to_string()).collect()
        })
    }
    assert_eq!(order(11), order(11));
    let distinct: std::collections::HashSet<_> = (0..200).map(order).collect();
    assert!(
        distinct.len() > 100,
        "only {} distinct orders",
        distinct.len()
    );
}

#[test]
fn a_service_returning_reapplies_the_same_scope() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let root = Context::root();
        let applies = Arc::new(AtomicUsize::new(0));
        let a = applies.clone();
        let dep = root.plugin(
            FnPlugin::new("dep", move |_, _: ()| {
                let a = a.clone();
                async move {
                    a.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }
            })
            .inject(Inject::required("registry")),
            (),
        );
        for round in 1..=3 {
            let p = root.child_scope("provider");
            p.context()
                .unwrap()
                .provide(Registry(AtomicUsize::new(0)))
                .unwrap();
            assert_eq!(dep.settled().await, ScopeStatus::Active);
            assert_eq!(applies.load(Ordering::SeqCst), round);
            p.dispose();
            assert_eq!(dep.status(), ScopeStatus::Pending);
        }
        root.dispose();
        assert!(root.live().is_zero());
    });
}
