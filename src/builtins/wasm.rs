//! `.wasm` entries: the entry kind this application registers on the generic host, which links
//! no WebAssembly engine itself (see `cordis_host::entry_kind`).

use std::path::PathBuf;
use std::sync::Arc;

use cordis_host::EntryKind;
use cordis_runtime::ErasedPlugin;

/// WebAssembly component tool plugins: an entry whose name ends in `.wasm` loads its vetted
/// file as a [`cordis_wasm::WasmPlugin`].
#[derive(Debug, Clone, Copy, Default)]
pub struct WasmKind;

impl EntryKind for WasmKind {
    fn label(&self) -> &str {
        "WebAssembly component"
    }

    fn recognizes(&self, name: &str) -> bool {
        name.ends_with(".wasm")
    }

    fn plugin(&self, name: &str, path: PathBuf, sha256: Option<[u8; 32]>) -> Arc<dyn ErasedPlugin> {
        Arc::new(cordis_wasm::WasmPlugin::new(name, path, sha256))
    }
}
