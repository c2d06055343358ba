//! The `cordis` binary: run, check and stress-test a `cordis.yml` (see `cordis --help`).

fn main() -> std::process::ExitCode {
    cordis::cli::main()
}
