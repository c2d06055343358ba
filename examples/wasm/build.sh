#!/bin/sh
# Rebuilds the example guests' components (*.wasm) from their WAT sources (*.wat), with no
# toolchain but this workspace (wat + wit-component). Run from anywhere:
#   sh examples/wasm/build.sh
# then update the sha256 pins in cordis.yml (the script prints the new hashes).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
cargo run -q -p cordis-wasm --example build_guests -- "$here"
sha256sum "$here"/*.wasm
