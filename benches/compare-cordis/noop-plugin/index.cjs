// The trivial plugin every entry of the generated cordis.yml refers to: the Node
// counterpart of our `debug/noop` (registers one effect, here a `dispose` listener).
//
// `reusable = true` is required: in cordis 3 a plain `apply` plugin is applied once per
// runtime and every further registration only adds a fork ("duplicate plugin detected"),
// so without it 1,000 entries would run `apply` once. Reusable plugins run `apply` per fork.
//
// The counter is for verification only (boot-cordis.mjs checks it equals N).
exports.name = 'bench-noop'
exports.reusable = true
exports.apply = (ctx) => {
  ctx.on('dispose', () => {})
  globalThis.__cordisBenchApplied = (globalThis.__cordisBenchApplied || 0) + 1
}
