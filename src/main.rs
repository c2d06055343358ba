//! The `cordis` binary: boot, check and stress-test a `cordis.yml` (see `cordis --help`).

fn main() -> std::process::ExitCode {
    cordis_host::cli::main()
}
