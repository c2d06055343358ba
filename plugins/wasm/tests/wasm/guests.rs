//! Guests written in WAT and turned into components with `wat` + `wit-component`: no external
//! toolchain. Shared by the tests, the benchmarks and `examples/build_guests.rs` (which rebuilds
//! the components committed in `examples/wasm/`).
//!
//! A guest is a core module implementing `cordis:plugin/tools@0.1.x` by hand-written canonical
//! ABI: strings and the tool list live in a data segment, a bump allocator serves
//! `cabi_realloc`, and `$ok`/`$err` write a `result<string, string>` to a fixed return area.
//! A guest's call body is WAT with `{name}` placeholders for its strings.

#![allow(
    dead_code,
    reason = "shared by tests, a bench and an example; each uses only some guests"
)]

/// The host's world.
pub const WORLD: &str = include_str!("../../wit/world.wit");
/// The version `WORLD` declares (guests are built at `0.1.0` unless they say otherwise, as the
/// committed examples were).
pub const WORLD_VERSION: &str = "0.1.1";

/// WASI 0.2 WIT (copied from wasmtime-wasi 48's `src/p2/wit/deps`) for guests that import it.
pub const WASI: &[(&str, &str)] = &[
    ("io.wit", include_str!("wasi-wit/io.wit")),
    ("clocks.wit", include_str!("wasi-wit/clocks.wit")),
    ("random.wit", include_str!("wasi-wit/random.wit")),
    ("filesystem.wit", include_str!("wasi-wit/filesystem.wit")),
    ("sockets.wit", include_str!("wasi-wit/sockets.wit")),
    ("cli.wit", include_str!("wasi-wit/cli.wit")),
];

/// One tool a guest describes.
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: &'static str,
    /// Index into the WIT `effect` enum (0 = read … 6 = unknown).
    pub effect: u8,
}

/// A guest to build.
pub struct Spec {
    pub tools: Vec<Tool>,
    /// Extra core imports (WAT `(import …)` forms).
    pub imports: String,
    /// Extra WIT world lines (`import wasi:random/random@0.2.12;`) beside `include tools`.
    pub world: String,
    /// Strings the body refers to as `{key}` (expands to `(i32.const ptr) (i32.const len)`).
    pub strings: Vec<(&'static str, String)>,
    /// The body of `call` (params `$np $nl $ap $al`, result: a return-area pointer); may use
    /// locals `$i $j $k $p $q` (i32) and `$x` (i64).
    pub call: String,
    /// The body of `init` (params `$cp $cl`); default: `(call $unit)`.
    pub init: Option<String>,
    /// The exported interface's version (to build a guest of another world version).
    pub version: &'static str,
    /// Extra functions.
    pub funcs: String,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            tools: Vec::new(),
            imports: String::new(),
            world: String::new(),
            strings: Vec::new(),
            call: String::new(),
            init: None,
            version: "0.1.0",
            funcs: String::new(),
        }
    }
}

/// The data segment: bytes from `BASE` on, with each string's place.
struct Data {
    bytes: Vec<u8>,
}

const BASE: u32 = 1024;
const HEAP: u32 = 65536;

impl Data {
    fn push(&mut self, s: &[u8]) -> (u32, u32) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
        let at = BASE + self.bytes.len() as u32;
        self.bytes.extend_from_slice(s);
        (at, s.len() as u32)
    }

    fn push_u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
}

fn escape(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

/// The guest's core module as WAT.
pub fn wat(spec: &Spec) -> String {
    let mut data = Data { bytes: Vec::new() };
    let mut records = Vec::new();
    for tool in &spec.tools {
        let n = data.push(tool.name.as_bytes());
        let d = data.push(tool.description.as_bytes());
        let p = data.push(tool.parameters.as_bytes());
        records.push((n, d, p, tool.effect));
    }
    let mut strings = Vec::new();
    for (key, s) in &spec.strings {
        strings.push((*key, data.push(s.as_bytes())));
    }
    // The tool list: records of 28 bytes (three strings, the effect byte, padding).
    let (list, _) = data.push(&[]);
    for (n, d, p, effect) in &records {
        for (ptr, len) in [n, d, p] {
            data.push_u32(*ptr);
            data.push_u32(*len);
        }
        data.bytes.extend_from_slice(&[*effect, 0, 0, 0]);
    }
    assert!(
        BASE as usize + data.bytes.len() < HEAP as usize,
        "data fits below the heap"
    );
    let mut call = spec.call.clone();
    let mut init = spec
        .init
        .clone()
        .unwrap_or_else(|| "(call $unit)".to_owned());
    for (key, (ptr, len)) in &strings {
        let placeholder = format!("{{{key}}}");
        let value = format!("(i32.const {ptr}) (i32.const {len})");
        call = call.replace(&placeholder, &value);
        init = init.replace(&placeholder, &value);
    }
    let iface = format!("cordis:plugin/guest@{}", spec.version);
    format!(
        r#"(module
  {imports}
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const {HEAP}))
  (data (i32.const {BASE}) "{data}")
  (func $alloc (param $size i32) (param $align i32) (result i32) (local $p i32)
    (local.set $p (i32.and
      (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
      (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $p) (local.get $size)))
    (block $done (loop $grow
      (br_if $done (i32.le_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536))))
      (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
      (br $grow)))
    (local.get $p))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (call $alloc (local.get 3) (local.get 2)))
  ;; result<string, string> (and result<_, string>) in the return area at 8.
  (func $ok (param $p i32) (param $l i32) (result i32)
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.store (i32.const 12) (local.get $p))
    (i32.store (i32.const 16) (local.get $l))
    (i32.const 8))
  (func $err (param $p i32) (param $l i32) (result i32)
    (i32.store8 (i32.const 8) (i32.const 1))
    (i32.store (i32.const 12) (local.get $p))
    (i32.store (i32.const 16) (local.get $l))
    (i32.const 8))
  (func $unit (result i32)
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.const 8))
  ;; Copies [p, p+l) to the end of the buffer at $buf/$len (both globals), returns nothing.
  (global $buf (mut i32) (i32.const 0))
  (global $len (mut i32) (i32.const 0))
  (func $start (param $cap i32)
    (global.set $buf (call $alloc (local.get $cap) (i32.const 1)))
    (global.set $len (i32.const 0)))
  (func $put (param $p i32) (param $l i32)
    (memory.copy (i32.add (global.get $buf) (global.get $len)) (local.get $p) (local.get $l))
    (global.set $len (i32.add (global.get $len) (local.get $l))))
  (func $put_hex64 (param $x i64) (local $i i32) (local $d i32)
    (local.set $i (i32.const 0))
    (loop $next
      (local.set $d (i32.wrap_i64 (i64.and (i64.shr_u (local.get $x)
        (i64.extend_i32_u (i32.sub (i32.const 60) (i32.mul (local.get $i) (i32.const 4))))) (i64.const 15))))
      (i32.store8 (i32.add (global.get $buf) (global.get $len))
        (i32.add (local.get $d) (select (i32.const 48) (i32.const 87) (i32.lt_u (local.get $d) (i32.const 10)))))
      (global.set $len (i32.add (global.get $len) (i32.const 1)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 16)))))
  (func $ok_buf (result i32) (call $ok (global.get $buf) (global.get $len)))
  {funcs}
  (func (export "{iface}#init") (param $cp i32) (param $cl i32) (result i32)
    {init})
  (func (export "{iface}#describe") (result i32)
    (i32.store (i32.const 32) (i32.const {list}))
    (i32.store (i32.const 36) (i32.const {count}))
    (i32.const 32))
  (func (export "{iface}#call") (param $np i32) (param $nl i32) (param $ap i32) (param $al i32) (result i32)
    (local $i i32) (local $j i32) (local $k i32) (local $p i32) (local $q i32) (local $x i64)
    {call})
)"#,
        imports = spec.imports,
        data = escape(&data.bytes),
        funcs = spec.funcs,
        count = records.len(),
    )
}

/// The guest as a component.
pub fn component(spec: &Spec) -> Vec<u8> {
    let module = wat::parse_str(wat(spec)).unwrap_or_else(|e| panic!("WAT: {e}\n{}", wat(spec)));
    component_of(module, &spec.world, spec.version)
}

/// A core module implementing the world (at `version`, plus the `world` lines) as a component.
pub fn component_of(mut module: Vec<u8>, world: &str, version: &str) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    for (file, text) in WASI {
        resolve.push_source(file, text).expect("WASI WIT parses");
    }
    // At another version the `@since(version = 0.1.1)` gates would name a version the package
    // is not (wit-parser refuses that): they go, and an unused import is dropped anyway.
    let tools = WORLD
        .replace(
            &format!("package cordis:plugin@{WORLD_VERSION}"),
            &format!("package cordis:plugin@{version}"),
        )
        .replace(&format!("@since(version = {WORLD_VERSION})"), "");
    resolve
        .push_source("world.wit", &tools)
        .expect("the world parses");
    let guest = format!(
        "package test:guest;\nworld guest {{\n  include cordis:plugin/tools@{version};\n  {world}\n}}\n"
    );
    let pkg = resolve
        .push_source("guest.wit", &guest)
        .expect("the guest world parses");
    let world = resolve
        .select_world(&[pkg], Some("guest"))
        .expect("a world");
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .expect("metadata embeds");
    wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("the module is a guest")
        .validate(true)
        .encode()
        .expect("the component encodes")
}

/// An object schema with no properties.
pub const OBJECT: &str = r#"{"type":"object"}"#;

/// One tool of `name`.
pub fn one(name: &'static str, description: &'static str, parameters: &'static str) -> Vec<Tool> {
    vec![Tool {
        name,
        description,
        parameters,
        effect: 0,
    }]
}

/// Answers `{"name": "X"}` with `{"greeting":"Hello, X!"}` (a failed call without a name).
pub fn hello() -> Spec {
    Spec {
        tools: one(
            "wasm_hello",
            "Greets someone by name.",
            r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#,
        ),
        strings: vec![
            ("key", "\"name\"".to_owned()),
            ("pre", "{\"greeting\":\"Hello, ".to_owned()),
            ("post", "!\"}".to_owned()),
            ("missing", "expected {\"name\": \"…\"}".to_owned()),
        ],
        // Find `"name"`, then the next `"`, then the closing `"` (no escapes: a test guest).
        call: r#"
    (local.set $i (i32.const 0))
    (block $found (loop $scan
      (if (i32.gt_u (i32.add (local.get $i) (i32.const 6)) (local.get $al))
        (then (return (call $err {missing}))))
      (if (call $eq (i32.add (local.get $ap) (local.get $i)) {key}) (then (br $found)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $scan)))
    (local.set $i (i32.add (local.get $i) (i32.const 6)))
    ;; the opening quote of the value
    (block $open (loop $skip
      (if (i32.ge_u (local.get $i) (local.get $al)) (then (return (call $err {missing}))))
      (br_if $open (i32.eq (i32.load8_u (i32.add (local.get $ap) (local.get $i))) (i32.const 34)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $skip)))
    (local.set $i (i32.add (local.get $i) (i32.const 1)))
    (local.set $j (local.get $i))
    (block $close (loop $value
      (if (i32.ge_u (local.get $j) (local.get $al)) (then (return (call $err {missing}))))
      (br_if $close (i32.eq (i32.load8_u (i32.add (local.get $ap) (local.get $j))) (i32.const 34)))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $value)))
    (call $start (i32.add (local.get $j) (i32.const 64)))
    (call $put {pre})
    (call $put (i32.add (local.get $ap) (local.get $i)) (i32.sub (local.get $j) (local.get $i)))
    (call $put {post})
    (call $ok_buf)"#
            .to_owned(),
        funcs: EQ.to_owned(),
        ..Spec::default()
    }
}

/// `$eq(p, q, l)`: the `l` bytes at `p` equal those at `q`.
const EQ: &str = r#"(func $eq (param $p i32) (param $q i32) (param $l i32) (result i32) (local $i i32)
    (block $no (loop $more
      (if (i32.ge_u (local.get $i) (local.get $l)) (then (return (i32.const 1))))
      (br_if $no (i32.ne (i32.load8_u (i32.add (local.get $p) (local.get $i)))
                         (i32.load8_u (i32.add (local.get $q) (local.get $i)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $more)))
    (i32.const 0))"#;

/// Loops forever.
pub fn spin() -> Spec {
    Spec {
        tools: one(
            "wasm_spin",
            "Loops forever (a fuel and deadline demo).",
            OBJECT,
        ),
        call: "(loop $forever (br $forever)) (unreachable)".to_owned(),
        ..Spec::default()
    }
}

/// Grows its memory a MiB at a time, forever.
pub fn balloon() -> Spec {
    Spec {
        tools: one(
            "wasm_balloon",
            "Grows its memory without end (a memory-limit demo).",
            OBJECT,
        ),
        call: "(loop $more (drop (memory.grow (i32.const 16))) (br $more)) (unreachable)"
            .to_owned(),
        ..Spec::default()
    }
}

/// Traps (`unreachable`) on tool `boom`; echoes its arguments on tool `echo`.
pub fn trap_and_echo() -> Spec {
    Spec {
        tools: vec![
            Tool { name: "boom", description: "Traps.", parameters: OBJECT, effect: 0 },
            Tool { name: "echo", description: "Answers its arguments.", parameters: OBJECT, effect: 0 },
        ],
        call: "(if (i32.eq (i32.load8_u (local.get $np)) (i32.const 98)) (then (unreachable))) (call $ok (local.get $ap) (local.get $al))".to_owned(),
        ..Spec::default()
    }
}

/// Echoes its arguments (the trivial call of the benchmarks).
pub fn echo(name: &'static str) -> Spec {
    Spec {
        tools: one(name, "Answers its arguments.", OBJECT),
        call: "(call $ok (local.get $ap) (local.get $al))".to_owned(),
        ..Spec::default()
    }
}

/// Answers `{"random":"<16 hex digits>"}` from `wasi:random/random`.
pub fn random() -> Spec {
    Spec {
        tools: one("dice", "A random 64-bit number.", OBJECT),
        imports: r#"(import "wasi:random/random@0.2.12" "get-random-u64" (func $rand (result i64)))"#
            .to_owned(),
        world: "import wasi:random/random@0.2.12;".to_owned(),
        strings: vec![("pre", "{\"random\":\"".to_owned()), ("post", "\"}".to_owned())],
        call: "(call $start (i32.const 64)) (call $put {pre}) (call $put_hex64 (call $rand)) (call $rand) (call $put_hex64) (call $put {post}) (call $ok_buf)".to_owned(),
        ..Spec::default()
    }
}

/// Imports `wasi:clocks/wall-clock` (refused unless `clock` is granted).
pub fn clock() -> Spec {
    Spec {
        tools: one("now", "The time.", OBJECT),
        imports: r#"(import "wasi:clocks/wall-clock@0.2.12" "now" (func $now (param i32)))"#.to_owned(),
        world: "import wasi:clocks/wall-clock@0.2.12;".to_owned(),
        strings: vec![("pre", "{\"seconds\":\"".to_owned()), ("post", "\"}".to_owned())],
        call: "(call $now (i32.const 48)) (call $start (i32.const 64)) (call $put {pre}) (call $put_hex64 (i64.load (i32.const 48))) (call $put {post}) (call $ok_buf)".to_owned(),
        ..Spec::default()
    }
}

/// Tool `probe`: reads `inside.txt`, creates and writes `new.txt`, opens `../outside.txt`, all
/// relative to its first preopen, and answers what happened:
/// `{"read":"<content>|denied:<code>","write":"wrote|denied:<code>","escape":"escaped|denied:<code>"}`.
pub fn files() -> Spec {
    Spec {
        tools: one("probe", "Tries the workspace.", OBJECT),
        imports: r#"
  (import "wasi:filesystem/preopens@0.2.12" "get-directories" (func $dirs (param i32)))
  (import "wasi:filesystem/types@0.2.12" "[method]descriptor.open-at"
    (func $open (param i32 i32 i32 i32 i32 i32 i32)))
  (import "wasi:filesystem/types@0.2.12" "[method]descriptor.read"
    (func $read (param i32 i64 i64 i32)))
  (import "wasi:filesystem/types@0.2.12" "[method]descriptor.write"
    (func $write (param i32 i32 i32 i64 i32)))"#
            .to_owned(),
        world: "import wasi:filesystem/preopens@0.2.12;".to_owned(),
        strings: vec![
            ("inside", "inside.txt".to_owned()),
            ("new", "new.txt".to_owned()),
            ("outside", "../outside.txt".to_owned()),
            ("x", "written by the guest".to_owned()),
            ("none", "{\"preopens\":0}".to_owned()),
            ("r", "{\"read\":\"".to_owned()),
            ("w", "\",\"write\":\"".to_owned()),
            ("e", "\",\"escape\":\"".to_owned()),
            ("end", "\"}".to_owned()),
            ("denied", "denied:".to_owned()),
            ("wrote", "wrote".to_owned()),
            ("escaped", "escaped".to_owned()),
        ],
        call: r#"
    (call $dirs (i32.const 48))
    (if (i32.eqz (i32.load (i32.const 52))) (then (return (call $err {none}))))
    (local.set $p (i32.load (i32.load (i32.const 48))))
    (call $start (i32.const 512))
    (call $put {r})
    ;; read inside.txt
    (call $open (local.get $p) (i32.const 0) {inside} (i32.const 0) (i32.const 1) (i32.const 64))
    (if (i32.load8_u (i32.const 64))
      (then (call $put {denied}) (call $put_hex64 (i64.load8_u (i32.const 68))))
      (else
        (call $read (i32.load (i32.const 68)) (i64.const 200) (i64.const 0) (i32.const 80))
        (if (i32.load8_u (i32.const 80))
          (then (call $put {denied}) (call $put_hex64 (i64.load8_u (i32.const 84))))
          (else (call $put (i32.load (i32.const 84)) (i32.load (i32.const 88)))))))
    (call $put {w})
    ;; create and write new.txt
    (call $open (local.get $p) (i32.const 0) {new} (i32.const 1) (i32.const 2) (i32.const 64))
    (if (i32.load8_u (i32.const 64))
      (then (call $put {denied}) (call $put_hex64 (i64.load8_u (i32.const 68))))
      (else
        (call $write (i32.load (i32.const 68)) {x} (i64.const 0) (i32.const 96))
        (if (i32.load8_u (i32.const 96))
          (then (call $put {denied}) (call $put_hex64 (i64.load8_u (i32.const 104))))
          (else (call $put {wrote})))))
    (call $put {e})
    ;; escape the root
    (call $open (local.get $p) (i32.const 0) {outside} (i32.const 0) (i32.const 1) (i32.const 64))
    (if (i32.load8_u (i32.const 64))
      (then (call $put {denied}) (call $put_hex64 (i64.load8_u (i32.const 68))))
      (else (call $put {escaped})))
    (call $put {end})
    (call $ok_buf)"#
            .to_owned(),
        ..Spec::default()
    }
}

/// Tool `env`: answers every variable it sees, as `{"env":"K=V;K=V;"}`.
pub fn env() -> Spec {
    Spec {
        tools: one("env", "Lists its environment.", OBJECT),
        imports:
            r#"(import "wasi:cli/environment@0.2.12" "get-environment" (func $env (param i32)))"#
                .to_owned(),
        world: "import wasi:cli/environment@0.2.12;".to_owned(),
        strings: vec![
            ("pre", "{\"env\":\"".to_owned()),
            ("eq", "=".to_owned()),
            ("semi", ";".to_owned()),
            ("end", "\"}".to_owned()),
        ],
        call: r#"
    (call $env (i32.const 48))
    (call $start (i32.const 65536))
    (call $put {pre})
    (local.set $p (i32.load (i32.const 48)))
    (local.set $i (i32.const 0))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (i32.load (i32.const 52))))
      (local.set $q (i32.add (local.get $p) (i32.mul (local.get $i) (i32.const 16))))
      (call $put (i32.load (local.get $q)) (i32.load offset=4 (local.get $q)))
      (call $put {eq})
      (call $put (i32.load offset=8 (local.get $q)) (i32.load offset=12 (local.get $q)))
      (call $put {semi})
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $put {end})
    (call $ok_buf)"#
            .to_owned(),
        ..Spec::default()
    }
}

/// Tool `big`: answers `{"data":"xxx…"}`, `size` bytes of JSON in all (a hostile result: the
/// bound on what reaches the model and the log is tested with 50 MB).
pub fn big(size: u32) -> Spec {
    assert!(size >= 16, "room for the JSON around the data");
    Spec {
        tools: one("big", "Answers a result of a fixed, large size.", OBJECT),
        strings: vec![
            ("pre", "{\"data\":\"".to_owned()),
            ("post", "\"}".to_owned()),
        ],
        call: format!(
            r#"
    (local.set $p (call $alloc (i32.const {size}) (i32.const 1)))
    (memory.fill (local.get $p) (i32.const 120) (i32.const {size}))
    (memory.copy (local.get $p) {{pre}})
    (memory.copy (i32.add (local.get $p) (i32.const {end})) {{post}})
    (call $ok (local.get $p) (i32.const {size}))"#,
            end = size - 2
        ),
        ..Spec::default()
    }
}

/// Tool `other`: answers `{"me":"other"}` (a guest whose code differs from [`echo`]'s).
pub fn other() -> Spec {
    Spec {
        tools: one("other", "Answers who it is.", OBJECT),
        strings: vec![("me", "{\"me\":\"other\"}".to_owned())],
        call: "(call $ok {me})".to_owned(),
        ..Spec::default()
    }
}

/// `$value(args, key)`: finds `key` (a quoted JSON key) in the arguments and the quoted string
/// after it (no escapes: a test guest), leaving it at `$vp`/`$vl`; 0 when there is none.
const VALUE: &str = r#"(global $vp (mut i32) (i32.const 0))
  (global $vl (mut i32) (i32.const 0))
  (func $value (param $ap i32) (param $al i32) (param $kp i32) (param $kl i32) (result i32)
    (local $i i32) (local $j i32)
    (block $found (loop $scan
      (if (i32.gt_u (i32.add (local.get $i) (local.get $kl)) (local.get $al)) (then (return (i32.const 0))))
      (br_if $found (call $eq (i32.add (local.get $ap) (local.get $i)) (local.get $kp) (local.get $kl)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $scan)))
    (local.set $i (i32.add (local.get $i) (local.get $kl)))
    (block $open (loop $skip
      (if (i32.ge_u (local.get $i) (local.get $al)) (then (return (i32.const 0))))
      (br_if $open (i32.eq (i32.load8_u (i32.add (local.get $ap) (local.get $i))) (i32.const 34)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $skip)))
    (local.set $i (i32.add (local.get $i) (i32.const 1)))
    (local.set $j (local.get $i))
    (block $close (loop $more
      (if (i32.ge_u (local.get $j) (local.get $al)) (then (return (i32.const 0))))
      (br_if $close (i32.eq (i32.load8_u (i32.add (local.get $ap) (local.get $j))) (i32.const 34)))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $more)))
    (global.set $vp (i32.add (local.get $ap) (local.get $i)))
    (global.set $vl (i32.sub (local.get $j) (local.get $i)))
    (i32.const 1))
  ;; Appends `n` in decimal to the buffer.
  (func $put_dec (param $n i32) (local $d i32)
    (local.set $d (i32.const 1))
    (block $top (loop $up
      (br_if $top (i32.gt_u (i32.mul (local.get $d) (i32.const 10)) (local.get $n)))
      (br_if $top (i32.ge_u (local.get $d) (i32.const 1000000000)))
      (local.set $d (i32.mul (local.get $d) (i32.const 10)))
      (br $up)))
    (loop $digit
      (i32.store8 (i32.add (global.get $buf) (global.get $len))
        (i32.add (i32.const 48) (i32.rem_u (i32.div_u (local.get $n) (local.get $d)) (i32.const 10))))
      (global.set $len (i32.add (global.get $len) (i32.const 1)))
      (local.set $d (i32.div_u (local.get $d) (i32.const 10)))
      (br_if $digit (local.get $d))))
  ;; Stores a (pointer, length) pair at `at`.
  (func $store2 (param $at i32) (param $p i32) (param $l i32)
    (i32.store (local.get $at) (local.get $p))
    (i32.store offset=4 (local.get $at) (local.get $l)))"#;

/// Tools `get` and `post` fetch the `url` of their arguments through `cordis:plugin/http`
/// (`post` sends the header `x-guest: wat` and the body `ping from the guest`), answering
/// `{"status":N,"headers":N,"body":"<the body as is>"}`, or failing with the host's error.
/// Built against the world at 0.1.1, the version that added `http`.
pub fn http() -> Spec {
    Spec {
        tools: vec![
            Tool {
                name: "get",
                description: "Fetches a URL.",
                parameters: OBJECT,
                effect: 5,
            },
            Tool {
                name: "post",
                description: "Posts to a URL.",
                parameters: OBJECT,
                effect: 5,
            },
        ],
        imports: format!(
            r#"(import "cordis:plugin/http@{WORLD_VERSION}" "fetch"
    (func $fetch (param i32 i32 i32 i32 i32 i32 i32 i32 i32)))"#
        ),
        strings: vec![
            ("url", "\"url\"".to_owned()),
            ("missing", "expected {\"url\": \"…\"}".to_owned()),
            ("GET", "GET".to_owned()),
            ("POST", "POST".to_owned()),
            ("hname", "x-guest".to_owned()),
            ("hvalue", "wat".to_owned()),
            ("payload", "ping from the guest".to_owned()),
            ("status", "{\"status\":".to_owned()),
            ("headers", ",\"headers\":".to_owned()),
            ("body", ",\"body\":\"".to_owned()),
            ("end", "\"}".to_owned()),
        ],
        // The return area of `fetch` (result<response, string>) is at 512: the case at 512,
        // then `status` (u16) at 516, `headers` at 520/524 and `body` at 528/532; an error's
        // string at 516/520. `post`'s one header (a tuple of two strings) is at 600.
        call: r#"
    (if (i32.eqz (call $value (local.get $ap) (local.get $al) {url}))
      (then (return (call $err {missing}))))
    (if (i32.eq (i32.load8_u (local.get $np)) (i32.const 112))
      (then
        (call $store2 (i32.const 600) {hname})
        (call $store2 (i32.const 608) {hvalue})
        (call $fetch {POST} (global.get $vp) (global.get $vl) (i32.const 600) (i32.const 1)
          {payload} (i32.const 512)))
      (else
        (call $fetch {GET} (global.get $vp) (global.get $vl) (i32.const 0) (i32.const 0)
          (i32.const 0) (i32.const 0) (i32.const 512))))
    (if (i32.load8_u (i32.const 512))
      (then (return (call $err (i32.load (i32.const 516)) (i32.load (i32.const 520))))))
    (call $start (i32.add (i32.load (i32.const 532)) (i32.const 64)))
    (call $put {status})
    (call $put_dec (i32.load16_u (i32.const 516)))
    (call $put {headers})
    (call $put_dec (i32.load (i32.const 524)))
    (call $put {body})
    (call $put (i32.load (i32.const 528)) (i32.load (i32.const 532)))
    (call $put {end})
    (call $ok_buf)"#
            .to_owned(),
        funcs: format!("{EQ}\n  {VALUE}"),
        version: WORLD_VERSION,
        ..Spec::default()
    }
}
