//! Runtime hot paths: applying and disposing many trivial plugins, and emitting to many listeners.
//!
//! Run with `cargo bench -p cordis-runtime`. For scale, cordis 3.18 in Node on a 2-core machine
//! takes ~330 ms to apply and ~75 ms to dispose 1,000 plugins that each register one listener.

use cordis_runtime::prelude::*;

fn main() {
    divan::main();
}

struct Tick;
impl Event for Tick {
    const NAME: &'static str = "bench/tick";
    type Output = ();
}

struct OneListener;
impl Plugin for OneListener {
    type Config = ();
    fn name(&self) -> &str {
        "one-listener"
    }
    async fn apply(&self, ctx: Context, _: &()) -> Result<(), BoxError> {
        let _ = ctx.on::<Tick>(|_| {});
        Ok(())
    }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Apply 1,000 plugins that each register one listener, wait until all are active, dispose all.
#[divan::bench(args = [1_000])]
fn apply_then_dispose(bencher: divan::Bencher, n: usize) {
    let rt = current_thread();
    bencher.bench_local(|| {
        rt.block_on(async {
            let root = Context::root();
            for _ in 0..n {
                let _ = root.plugin(OneListener, ());
            }
            root.idle().await;
            root.dispose();
            debug_assert!(root.live().is_zero());
        })
    });
}

/// Emit one event to 1,000 listeners.
#[divan::bench(args = [1_000])]
fn emit_to_listeners(bencher: divan::Bencher, n: usize) {
    let rt = current_thread();
    let root = rt.block_on(async {
        let root = Context::root();
        for _ in 0..n {
            let _ = root.on::<Tick>(|_| {});
        }
        root
    });
    bencher.bench_local(|| root.emit(Tick));
    root.dispose();
}
