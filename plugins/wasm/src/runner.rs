//! One entry's guest instance: calls serialized, limits set per call, the store rebuilt from the
//! pre-linked component after any trap, out-of-fuel, interrupt or dropped call.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rand_chacha::rand_core::SeedableRng;
use wasmtime::component::{Instance, Val};
use wasmtime::{Store, Trap};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::engine::EPOCH_TICK;
use crate::error::{CallError, LoadError};
use crate::grants::{Capabilities, FsAccess};
use crate::guest::{Described, Guest, described};
use crate::http::{Exchange, Fetcher, HttpRecord, Tape};
use crate::limits::{Limiter, Limits, YIELD_INTERVAL};
use crate::state::{LogStream, State};

/// How an entry runs its guest.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// The entry, for log lines.
    pub entry: Arc<str>,
    /// Fuel and memory.
    pub limits: Limits,
    /// What the guest may reach.
    pub grants: Capabilities,
    /// The workspace root to preopen when `grants.workspace` is set (`None`: no preopen).
    pub workspace: Option<PathBuf>,
    /// The guest's config, as JSON text, passed to `init`.
    pub config: String,
    /// Seeds granted randomness (with the store's generation); `None`: the OS's entropy.
    pub seed: Option<u64>,
    /// The wall-clock deadline of one call (the tool timeout), enforced by epochs.
    pub deadline: Duration,
}

/// A call's answer and the requests it made through `cordis:plugin/http` (in order, refused
/// ones included).
#[derive(Debug)]
pub struct Recorded {
    /// The guest's answer (JSON text), or why the call failed.
    pub answer: Result<String, CallError>,
    /// The requests of the call.
    pub http: Vec<HttpRecord>,
}

/// A live instance and its store.
struct Live {
    store: Store<State>,
    instance: Instance,
}

/// Runs calls into one guest, one at a time.
pub struct Runner {
    guest: Arc<Guest>,
    options: RunnerOptions,
    /// `None` between a poisoned (or not yet made) instance and the next call.
    live: tokio::sync::Mutex<Option<Live>>,
    /// Stores made so far: each seeds its randomness from its own number.
    generation: AtomicU64,
    /// The HTTP client of an entry granted `network`, made with its first store.
    fetcher: OnceLock<Arc<Fetcher>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("entry", &self.options.entry)
            .finish()
    }
}

/// FNV-1a over `parts`: a stable seed from a schedule seed, an entry and a generation.
fn mix(parts: &[&[u8]]) -> u64 {
    parts
        .iter()
        .flat_map(|p| p.iter())
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

impl Runner {
    /// A runner of `guest`; no instance is made until the first call or [`Runner::describe`].
    pub fn new(guest: Arc<Guest>, options: RunnerOptions) -> Runner {
        Runner {
            guest,
            options,
            live: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            fetcher: OnceLock::new(),
        }
    }

    /// The guest.
    pub fn guest(&self) -> &Arc<Guest> {
        &self.guest
    }

    /// How many stores have been made (the first instance is 1; each rebuild adds one).
    pub fn generations(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// A store for one instance; `read_only` preopens the workspace read-only whatever the
    /// grant says.
    fn store(&self, read_only: bool) -> Result<Store<State>, String> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let grants = &self.options.grants;
        let mut wasi = WasiCtxBuilder::new();
        // stdin stays closed; stdout and stderr become log lines of the entry.
        wasi.stdout(LogStream::new(self.options.entry.clone(), "stdout"));
        wasi.stderr(LogStream::new(self.options.entry.clone(), "stderr"));
        if let Some(names) = &grants.env {
            // Only the listed variables, and only those set; sorted, so the guest's view does
            // not depend on the order they were listed in.
            let mut names = names.clone();
            names.sort();
            names.dedup();
            for name in names {
                if let Ok(value) = std::env::var(&name) {
                    wasi.env(&name, value);
                }
            }
        }
        if let (Some(access), Some(root)) = (grants.workspace, &self.options.workspace) {
            let perms = match access {
                FsAccess::Write if !read_only => FsPerms::ReadWrite,
                _ => FsPerms::ReadOnly,
            };
            wasi.preopened_dir(root, "/", perms)
                .map_err(|e| format!("cannot open the workspace {}: {e}", root.display()))?;
        }
        if grants.random
            && let Some(seed) = self.options.seed
        {
            let s = mix(&[
                &seed.to_le_bytes(),
                self.options.entry.as_bytes(),
                &generation.to_le_bytes(),
            ]);
            wasi.secure_random(rand_chacha::ChaCha20Rng::seed_from_u64(s));
            wasi.insecure_random(rand_chacha::ChaCha8Rng::seed_from_u64(s ^ 1));
            wasi.insecure_random_seed(u128::from(s) << 64 | u128::from(s ^ 2));
        }
        let http = match &grants.network {
            Some(network) => Some(Exchange::new(self.fetcher(network)?)),
            None => None,
        };
        let state = State::new(
            Limiter::new(&self.options.limits),
            wasi.build(),
            self.options.entry.clone(),
            http,
        );
        let mut store = Store::new(self.guest.engine.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store
            .fuel_async_yield_interval(Some(YIELD_INTERVAL))
            .map_err(|e| e.to_string())?;
        Ok(store)
    }

    /// The entry's HTTP client (one for all its stores).
    fn fetcher(&self, network: &crate::grants::Network) -> Result<Arc<Fetcher>, String> {
        if let Some(fetcher) = self.fetcher.get() {
            return Ok(fetcher.clone());
        }
        let made = Arc::new(Fetcher::new(network.clone(), self.options.entry.clone())?);
        Ok(self.fetcher.get_or_init(|| made).clone())
    }

    /// Fresh fuel and a fresh deadline before every call into the guest (a store starts with
    /// no fuel and a deadline of 0 unless set); the network opens only for a `call`.
    fn arm(&self, store: &mut Store<State>, call: bool) -> Result<(), String> {
        store
            .set_fuel(self.options.limits.fuel)
            .map_err(|e| e.to_string())?;
        let ticks = self
            .options
            .deadline
            .as_millis()
            .div_ceil(EPOCH_TICK.as_millis().max(1));
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1));
        store.epoch_deadline_trap();
        store.data_mut().limiter.hit = None;
        let deadline = Instant::now() + self.options.deadline;
        if let Some(http) = &mut store.data_mut().http {
            http.begin(call, deadline);
        }
        Ok(())
    }

    /// Why a call into the store stopped.
    fn classify(&self, store: &Store<State>, e: &wasmtime::Error) -> CallError {
        if let Some(hit) = &store.data().limiter.hit {
            return CallError::Limit(hit.clone());
        }
        match e.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => CallError::OutOfFuel {
                fuel: self.options.limits.fuel,
            },
            Some(Trap::Interrupt) => CallError::Deadline {
                ms: u64::try_from(self.options.deadline.as_millis()).unwrap_or(u64::MAX),
            },
            // The trap's own words ("wasm `unreachable` instruction executed"), without the
            // backtrace of unnamed functions.
            Some(trap) => CallError::Trap(trap.to_string()),
            None => CallError::Trap(e.root_cause().to_string()),
        }
    }

    /// A new instance with `init` run.
    async fn instantiate(&self, read_only: bool) -> Result<Live, CallError> {
        let mut store = self.store(read_only).map_err(CallError::Instance)?;
        self.arm(&mut store, false).map_err(CallError::Instance)?;
        let instance = match self.guest.pre.instantiate_async(&mut store).await {
            Ok(i) => i,
            Err(e) => {
                return Err(match self.classify(&store, &e) {
                    CallError::Trap(m) => CallError::Instance(format!("instantiate failed: {m}")),
                    other => other,
                });
            }
        };
        let init = instance
            .get_typed_func::<(&str,), (Result<(), String>,)>(&mut store, &self.guest.init)
            .map_err(|e| CallError::Instance(format!("init has the wrong type: {e:#}")))?;
        match init
            .call_async(&mut store, (self.options.config.as_str(),))
            .await
        {
            Ok((Ok(()),)) => Ok(Live { store, instance }),
            Ok((Err(e),)) => Err(CallError::Instance(format!("init failed: {e}"))),
            Err(e) => Err(match self.classify(&store, &e) {
                CallError::Trap(m) => CallError::Instance(format!("init trapped: {m}")),
                other => other,
            }),
        }
    }

    /// Makes an instance (running `init`) and asks it for its tools; the instance is kept for
    /// the first call.
    ///
    /// # Errors
    /// Instantiation, `init` or `describe` failed, or the tools are malformed.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped describe leaves no instance behind.
    pub async fn describe(&self) -> Result<Vec<Described>, LoadError> {
        let mut slot = self.live.lock().await;
        let mut live = match slot.take() {
            Some(live) => live,
            None => self
                .instantiate(false)
                .await
                .map_err(|e| LoadError::Stage {
                    stage: "instantiate",
                    reason: e.to_string(),
                })?,
        };
        let stage = |reason: String| LoadError::Stage {
            stage: "describe",
            reason,
        };
        self.arm(&mut live.store, false).map_err(stage)?;
        let func = live
            .instance
            .get_func(&mut live.store, &self.guest.describe)
            .ok_or_else(|| stage("no describe function".to_owned()))?;
        let mut results = [Val::Bool(false)];
        func.call_async(&mut live.store, &[], &mut results)
            .await
            .map_err(|e| stage(self.classify(&live.store, &e).to_string()))?;
        let [Val::List(list)] = &results else {
            return Err(stage("describe must return a list of tools".to_owned()));
        };
        let tools = described(list).map_err(stage)?;
        *slot = Some(live);
        Ok(tools)
    }

    /// Drops the live instance, if any: the next call makes (and initializes) a new one.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn reset(&self) {
        self.live.lock().await.take();
    }

    /// Calls tool `name` with `arguments` (JSON text) as granted; the guest's answer (JSON
    /// text). See [`Runner::call_as`].
    ///
    /// # Errors
    /// See [`CallError`].
    ///
    /// # Cancel safety
    /// As [`Runner::call_as`].
    pub async fn call(&self, name: &str, arguments: &str) -> Result<String, CallError> {
        self.call_as(name, arguments, false).await
    }

    /// Calls tool `name` with `arguments` (JSON text); the guest's answer (JSON text).
    ///
    /// # Errors
    /// See [`CallError`]. After anything but [`CallError::Failed`] the instance is dropped and
    /// the next call makes a new one.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call drops its instance (a guest stopped mid-call cannot be
    /// entered again), and the next call makes a new one.
    ///
    /// A `read_only` call (one that ran without a question: [`cordis_tools::Clearance`]) of a
    /// guest granted workspace writes runs on an instance of its own whose workspace is
    /// read-only, made for the call and dropped after it, so it writes nothing and leaves the
    /// guest's usual instance as it was.
    pub async fn call_as(
        &self,
        name: &str,
        arguments: &str,
        read_only: bool,
    ) -> Result<String, CallError> {
        self.call_recorded(name, arguments, read_only).await.answer
    }

    /// [`Runner::call_as`], with the requests the call made through `cordis:plugin/http`
    /// (a call that failed before the guest ran made none).
    ///
    /// # Cancel safety
    /// As [`Runner::call_as`]; a dropped call's requests are not recorded.
    pub async fn call_recorded(&self, name: &str, arguments: &str, read_only: bool) -> Recorded {
        self.call_on_tape(name, arguments, read_only, Tape::Live)
            .await
    }

    /// [`Runner::call_recorded`], the requests answered as `tape` says: from the network
    /// (keeping each answer for replays with [`Tape::Keep`]) or, in a replay, from the
    /// recording, never the network. A replayed request that does not match the recording
    /// fails the call with [`CallError::Instance`] naming the request and what differed.
    ///
    /// # Cancel safety
    /// As [`Runner::call_as`]; a dropped call's requests are not recorded (nor kept).
    pub async fn call_on_tape(
        &self,
        name: &str,
        arguments: &str,
        read_only: bool,
        tape: Tape,
    ) -> Recorded {
        let answer = |answer| Recorded {
            answer,
            http: Vec::new(),
        };
        let mut slot = self.live.lock().await;
        let narrowed = read_only && self.options.grants.workspace == Some(FsAccess::Write);
        // Taken out while the guest runs: if this future is dropped, the slot stays empty.
        let made = match slot.take() {
            Some(live) if !narrowed => Ok(live),
            Some(live) => {
                *slot = Some(live);
                self.instantiate(true).await
            }
            None => self.instantiate(narrowed).await,
        };
        let mut live = match made {
            Ok(live) => live,
            Err(e) => return answer(Err(e)),
        };
        if let Err(e) = self.arm(&mut live.store, true) {
            return answer(Err(CallError::Instance(e)));
        }
        if let Some(http) = &mut live.store.data_mut().http {
            http.play(tape);
        }
        let func = match live
            .instance
            .get_typed_func::<(&str, &str), (Result<String, String>,)>(
                &mut live.store,
                &self.guest.call,
            ) {
            Ok(func) => func,
            Err(e) => {
                return answer(Err(CallError::Instance(format!(
                    "call has the wrong type: {e:#}"
                ))));
            }
        };
        let result = func.call_async(&mut live.store, (name, arguments)).await;
        let (http, mismatch) = live
            .store
            .data_mut()
            .http
            .as_mut()
            .map(Exchange::take)
            .unwrap_or_default();
        if let Some(mismatch) = mismatch {
            // The guest was stopped mid-call: its instance is not entered again.
            return Recorded {
                answer: Err(CallError::Instance(mismatch.0)),
                http,
            };
        }
        let answer = match result {
            Ok((answer,)) => {
                if !narrowed {
                    *slot = Some(live);
                }
                answer.map_err(CallError::Failed)
            }
            Err(e) => Err(self.classify(&live.store, &e)),
        };
        Recorded { answer, http }
    }
}
