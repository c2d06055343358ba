// Boots one cordis.yml with cordis@3.18.1 + @cordisjs/loader@0.13.1, in-process, and prints
// one JSON line: {"n", "import_ms", "boot_ms", "process_ms", ...}.
//
//   node boot-cordis.mjs CONFIG.yml N
//
// Must run from the temp dir where run.sh installed package.json (the entries' `name`
// is the bare specifier `cordis-plugin-bench-noop`, which the loader resolves with `import()`).
//
// What is timed (boot_ms): from `new Context()` to "all N plugins applied". This is the same
// bootstrap the `cordis` CLI worker does (cordis/lib/worker/index.mjs `start()`):
//   ctx.plugin(Loader, { name, filename }); await ctx.start()
// minus the logger/daemon plugins. `ctx.start()` alone is NOT enough: the loader's `ready`
// hook reads the YAML and calls `EntryGroup.update()`, which starts every entry with a
// fire-and-forget `this.create(...)` (dynamic `import()` of the plugin, then
// `registry.plugin()`), so `ctx.start()` can resolve before the entries are forked. We
// therefore wait for N `loader/entry-fork` events of type `apply` (emitted right after
// `registry.plugin()` for an entry) and then `await ctx.events.flush()`, which waits for
// every pending scope task (each reusable plugin's `apply` runs as such a task). Finally we
// verify: N entries in the loader store, every fork ACTIVE, the plugin's own apply counter = N,
// and no `internal/error`.
const [configArg, nArg] = process.argv.slice(2)
if (!configArg || !nArg) {
  console.error('usage: node boot-cordis.mjs CONFIG.yml N')
  process.exit(2)
}
const n = Number(nArg)
const { resolve } = await import('node:path')
const filename = resolve(configArg)

const tImport0 = process.hrtime.bigint()
const { Context } = await import('cordis')
const { default: Loader } = await import('@cordisjs/loader')
const tImport1 = process.hrtime.bigint()

const errors = []
const warnings = []
let forked = 0
let onAllForked
const allForked = new Promise((r) => { onAllForked = r })

const t0 = process.hrtime.bigint()
const ctx = new Context()
ctx.on('internal/error', (error) => { errors.push(String(error?.stack ?? error)) })
ctx.on('internal/warning', (error) => { warnings.push(String(error?.message ?? error)) })
ctx.on('loader/entry-fork', (entry, type) => {
  if (type === 'apply' && ++forked === n) onAllForked()
})
ctx.plugin(Loader, { name: 'cordis', filename })
await ctx.start()
const tStarted = process.hrtime.bigint()

const timeoutMs = Number(process.env.BOOT_TIMEOUT_MS ?? 600_000)
let timer
const timedOut = new Promise((r) => { timer = setTimeout(() => r('timeout'), timeoutMs) })
const outcome = await Promise.race([allForked.then(() => 'ok'), timedOut])
clearTimeout(timer)
if (outcome === 'timeout') {
  console.error(`boot-cordis: only ${forked}/${n} entries forked after ${timeoutMs} ms`)
  for (const e of errors.slice(0, 5)) console.error(e)
  process.exit(1)
}
await ctx.events.flush()
const t1 = process.hrtime.bigint()

// ---- verification (not timed) ----
const entries = Object.values(ctx.loader.store)
const active = entries.filter((e) => e.fork && e.fork.status === 2 /* ScopeStatus.ACTIVE */).length
const applied = globalThis.__cordisBenchApplied ?? 0
const ms = (a, b) => Number(b - a) / 1e6
const report = {
  n,
  import_ms: ms(tImport0, tImport1),
  boot_ms: ms(t0, t1),
  start_resolved_ms: ms(t0, tStarted),
  since_node_start_ms: performance.now(), // from Node's time origin (process start) to now
  entries: entries.length,
  active,
  applied,
  errors: errors.length,
  warnings: warnings.length,
  node: process.version,
}
const ok = entries.length === n && active === n && applied === n && errors.length === 0
if (!ok) {
  console.error('boot-cordis: verification failed: ' + JSON.stringify(report))
  for (const e of errors.slice(0, 5)) console.error(e)
  for (const w of warnings.slice(0, 5)) console.error('warning: ' + w)
}
console.log(JSON.stringify(report))
// Do not dispose (not part of the measurement); the loader may hold timers/handles.
process.exit(ok ? 0 : 1)
