//! The `cordis` binary: run, check and stress-test a `cordis.yml` (see `cordis --help`).

// A boot allocates and frees many small objects; glibc's malloc spent a quarter of a seeded
// boot consolidating and trimming. No allocation crosses the dylib ABI (outputs are copied
// through a writer callback), so the host's allocator is its own business.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // First, while this is the only thread: the commands and servers this process starts must
    // not read its secrets (API keys) back from /proc.
    if let Err(e) = cordis_sandbox::protect_host() {
        eprintln!("cordis: warning: the environment stays readable through /proc: {e}");
    }
    cordis::cli::main()
}
