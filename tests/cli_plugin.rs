//! `cordis plugin add|list|update|remove` on WebAssembly components: a conflicting component
//! refused with nothing written, a good one appended with its pin and the file otherwise byte
//! for byte as it was, list/update/remove, and sources that are not regular files refused.
#![cfg(unix)]

use std::path::{Path, PathBuf};

use crate::common::{cordis, cordis_command};

/// A config with comments, a two-space-indented list and blank lines between entries: the
/// layout `add` must keep and follow.
const ORIGINAL: &str = "\
# A composition with one WebAssembly tool.
  - id: system-prompt
    name: system-prompt   # the prompt

  - id: tools
    name: tools

  # Says hello (tool `wasm_hello`).
  - id: hello
    name: ./wasm_hello.wasm
";

/// A project directory holding [`ORIGINAL`] as cordis.yml and the example hello component.
fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(example("wasm_hello"), dir.path().join("wasm_hello.wasm")).unwrap();
    let config = dir.path().join("cordis.yml");
    std::fs::write(&config, ORIGINAL).unwrap();
    (dir, config)
}

/// A committed example component (`examples/wasm/NAME.wasm`, its tool is NAME).
fn example(name: &str) -> PathBuf {
    [
        env!("CARGO_MANIFEST_DIR"),
        "examples/wasm",
        &format!("{name}.wasm"),
    ]
    .iter()
    .collect()
}

/// Copies example `guest` to `dir/build/file` (outside the plugin directory), returns the path.
fn build(dir: &Path, file: &str, guest: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("build")).unwrap();
    let path = dir.join("build").join(file);
    std::fs::copy(example(guest), &path).unwrap();
    path
}

fn sha256(path: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn plugin(config: &Path, args: &[&str]) -> crate::common::Run {
    let config = config.display().to_string();
    let mut all = vec!["plugin"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--config", &config]);
    cordis(&all, &[])
}

#[test]
fn adding_a_component_whose_tool_an_entry_claims_is_refused_naming_it_and_writes_nothing() {
    let (dir, config) = project();
    let rival = build(dir.path(), "rival.wasm", "wasm_hello");
    let add = plugin(&config, &["add", &rival.display().to_string()]);
    assert_ne!(add.code, 0, "{}{}", add.out, add.err);
    assert!(
        add.err.contains(
            "entry \"rival\" (./plugins/rival.wasm) is conflict: tool \"wasm_hello\" is claimed by entries \"hello\" and \"rival\""
        ),
        "{}",
        add.err
    );
    assert!(
        add.err.contains("not added: entry \"rival\""),
        "{}",
        add.err
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), ORIGINAL);
    assert!(
        !dir.path().join("plugins").exists(),
        "the copy was taken back"
    );
    assert!(!dir.path().join(".cordis").exists());
}

#[test]
fn add_list_update_and_remove_keep_the_file_byte_for_byte_but_for_the_entry() {
    let (dir, config) = project();
    let weather = build(dir.path(), "weather.wasm", "wasm_spin");
    let pin = sha256(&weather);
    let add = plugin(&config, &["add", &weather.display().to_string()]);
    assert_eq!(add.code, 0, "{}{}", add.out, add.err);
    let added = format!(
        "{ORIGINAL}\n  - id: weather\n    name: ./plugins/weather.wasm\n    sha256: {pin}\n"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), added);
    let copy = dir.path().join("plugins/weather.wasm");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&weather).unwrap()
    );
    assert!(add.out.contains("proof: "), "{}", add.out);

    let list = plugin(&config, &["list"]);
    assert_eq!(list.code, 0, "{}{}", list.out, list.err);
    let row = |out: &str, id: &str| {
        out.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("no row {id} in:\n{out}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row(&list.out, "weather"),
        ["weather", "wasm", "./plugins/weather.wasm", &pin, "matches"]
    );
    assert_eq!(
        row(&list.out, "hello"),
        ["hello", "wasm", "./wasm_hello.wasm", "-", "not", "pinned"]
    );

    // The file changes (a rebuild): list says so, update re-pins it through the gate.
    std::fs::copy(example("wasm_balloon"), &copy).unwrap();
    let repin = sha256(&copy);
    assert_ne!(repin, pin);
    let list = plugin(&config, &["list"]);
    assert_eq!(list.code, 1, "{}{}", list.out, list.err);
    assert_eq!(row(&list.out, "weather")[4], "differs:");
    let update = plugin(&config, &["update", "weather"]);
    assert_eq!(update.code, 0, "{}{}", update.out, update.err);
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        added.replace(&pin, &repin)
    );
    assert_eq!(plugin(&config, &["list"]).code, 0);

    let remove = plugin(&config, &["remove", "weather"]);
    assert_eq!(remove.code, 0, "{}{}", remove.out, remove.err);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), ORIGINAL);
    assert!(
        !copy.exists(),
        "the copy in the plugin directory is removed"
    );
}

#[test]
fn a_symlink_a_fifo_or_a_directory_as_path_is_refused_and_nothing_changes() {
    let (dir, config) = project();
    let real = build(dir.path(), "weather.wasm", "wasm_spin");
    let link = dir.path().join("build/link.wasm");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let fifo = dir.path().join("build/fifo.wasm");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let folder = dir.path().join("build/folder.wasm");
    std::fs::create_dir(&folder).unwrap();
    for (path, why) in [
        (&link, "is a symbolic link; name the file it points to"),
        (&fifo, "is a FIFO, not a regular file"),
        (&folder, "is a directory, not a regular file"),
    ] {
        let add = plugin(&config, &["add", &path.display().to_string()]);
        assert_eq!(add.code, 2, "{}{}", add.out, add.err);
        assert!(add.err.contains(why), "{}", add.err);
        assert_eq!(std::fs::read_to_string(&config).unwrap(), ORIGINAL);
        assert!(!dir.path().join("plugins").exists());
    }
}

#[test]
fn plain_http_is_refused_and_an_unpinned_url_without_a_terminal_asks_for_sha256() {
    let (dir, config) = project();
    let http = plugin(&config, &["add", "http://example.org/weather.wasm"]);
    assert_eq!(http.code, 2);
    assert!(
        http.err.contains("only https:// URLs are downloaded"),
        "{}",
        http.err
    );
    // Spawned with stdin piped: no terminal to confirm a pin, so nothing is downloaded.
    let out = cordis_command(
        dir.path(),
        &["plugin", "add", "https://example.invalid/weather.wasm"],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("pass --sha256 HEX"), "{err}");
    assert!(!err.contains("downloading"), "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), ORIGINAL);
}

#[test]
fn a_shared_library_is_copied_and_added_as_a_pinned_dylib_entry() {
    let (dir, config) = project();
    // The C fixture plugin, built with `cc` as tests/common/plugins.rs builds it.
    std::fs::create_dir_all(dir.path().join("build")).unwrap();
    let lib = dir.path().join("build/libc_tools.so");
    let root = env!("CARGO_MANIFEST_DIR");
    let cc = std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-O1", "-I"])
        .arg(format!("{root}/plugins/sdk/include"))
        .arg("-o")
        .arg(&lib)
        .arg(format!("{root}/tests/fixtures/c-plugin/plugin.c"))
        .output()
        .expect("this test needs a C compiler (`cc`)");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let pin = sha256(&lib);
    // A process of its own: the gate loads the library, and this test binary loads none.
    let out = cordis_command(dir.path(), &["plugin", "add", "build/libc_tools.so"])
        .env("CORDIS_DYLIB_CACHE", dir.path().join("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        format!(
            "{ORIGINAL}\n  - id: c_tools\n    name: ./plugins/libc_tools.so\n    sha256: {pin}\n"
        )
    );
    let list = plugin(&config, &["list"]);
    assert_eq!(list.code, 0, "{}{}", list.out, list.err);
    assert!(
        list.out.contains(&format!(
            "c_tools  dylib  ./plugins/libc_tools.so  {pin}  matches"
        )),
        "{}",
        list.out
    );
}
