//! What a guest's store holds, and the linkers that give a guest its imports.

use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, ResourceTable, Val};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::error::LoadError;
use crate::http::{Exchange, Request};
use crate::limits::Limiter;

/// The longest log line a guest may write, in bytes (longer lines are cut).
pub const MAX_LOG_LINE: usize = 4096;
/// Log lines a guest may write per store before the rest are dropped (one notice says so).
pub const MAX_LOG_LINES: u32 = 1000;

/// The data of one guest's store.
pub(crate) struct State {
    pub(crate) limiter: Limiter,
    table: ResourceTable,
    wasi: WasiCtx,
    /// The entry the guest belongs to, for its log lines.
    entry: Arc<str>,
    logged: u32,
    /// The mediated network, when the entry grants it.
    pub(crate) http: Option<Exchange>,
}

impl State {
    pub(crate) fn new(
        limiter: Limiter,
        wasi: WasiCtx,
        entry: Arc<str>,
        http: Option<Exchange>,
    ) -> State {
        State {
            limiter,
            table: ResourceTable::new(),
            wasi,
            entry,
            logged: 0,
            http,
        }
    }

    fn log(&mut self, level: &str, message: &str) {
        self.logged = self.logged.saturating_add(1);
        if self.logged > MAX_LOG_LINES {
            if self.logged == MAX_LOG_LINES + 1 {
                tracing::warn!(entry = %self.entry, "the guest wrote more than {MAX_LOG_LINES} log lines; dropping the rest");
            }
            return;
        }
        let mut end = message.len().min(MAX_LOG_LINE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let message = &message[..end];
        let entry = &*self.entry;
        match level {
            "trace" => tracing::trace!(entry, "{message}"),
            "debug" => tracing::debug!(entry, "{message}"),
            "info" => tracing::info!(entry, "{message}"),
            "warn" => tracing::warn!(entry, "{message}"),
            _ => tracing::error!(entry, "{message}"),
        }
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A linker with `cordis:plugin/log`, and WASI 0.2 when `wasi` (which interfaces a guest may
/// import is decided before linking, by [`crate::grants::check_import`]).
pub(crate) fn linker(engine: &wasmtime::Engine, wasi: bool) -> Result<Linker<State>, LoadError> {
    let shape = |e: wasmtime::Error| LoadError::Shape(format!("cannot link the host: {e:#}"));
    let mut linker = Linker::<State>::new(engine);
    // Any 0.1.x guest's `log` import resolves to this one (wasmtime matches semver-compatible
    // versions).
    linker
        .instance(&format!(
            "cordis:plugin/log@{}",
            crate::guest::WORLD_VERSION
        ))
        .map_err(shape)?
        .func_new("log", |mut store, _ty, params, _results| {
            if let [Val::Enum(level), Val::String(message)] = params {
                store.data_mut().log(level, message);
            }
            Ok(())
        })
        .map_err(shape)?;
    // `fetch` is linked for every guest; only a guest whose entry grants `network` may import
    // it (the import check), and only its store holds an exchange.
    linker
        .instance(&format!(
            "cordis:plugin/http@{}",
            crate::guest::WORLD_VERSION
        ))
        .map_err(shape)?
        .func_wrap_async(
            "fetch",
            |mut store: StoreContextMut<'_, State>, (request,): (Request,)| {
                Box::new(async move {
                    // A replayed request that does not match the recording stops the guest:
                    // the call fails with the mismatch (the runner reads it from the exchange).
                    let answer = crate::http::fetch(store.data_mut().http.as_mut(), request)
                        .await
                        .map_err(wasmtime::Error::new)?;
                    Ok((answer,))
                })
            },
        )
        .map_err(shape)?;
    if wasi {
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(shape)?;
    }
    Ok(linker)
}

/// A guest's stdout or stderr: each line goes to the host's log, attributed to the entry
/// (at most [`MAX_LOG_LINE`] bytes a line; nothing is kept).
pub(crate) struct LogStream {
    entry: Arc<str>,
    stream: &'static str,
}

impl LogStream {
    pub(crate) fn new(entry: Arc<str>, stream: &'static str) -> LogStream {
        LogStream { entry, stream }
    }
}

impl wasmtime_wasi::cli::IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for LogStream {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LineWriter {
            entry: self.entry.clone(),
            stream: self.stream,
            line: Vec::new(),
        })
    }
}

/// Splits what a guest writes into log lines.
struct LineWriter {
    entry: Arc<str>,
    stream: &'static str,
    line: Vec<u8>,
}

impl LineWriter {
    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        let entry = &*self.entry;
        tracing::info!(entry, stream = self.stream, "{}", text.trim_end());
        self.line.clear();
    }
}

impl tokio::io::AsyncWrite for LineWriter {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        for &b in buf {
            if b == b'\n' {
                self.emit();
            } else if self.line.len() < MAX_LOG_LINE {
                self.line.push(b);
            }
        }
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if !self.line.is_empty() {
            self.emit();
        }
        std::task::Poll::Ready(Ok(()))
    }
}
