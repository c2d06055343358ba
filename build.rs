//! Records the commit the binary is built from, for `cordis --version` (empty outside a git
//! checkout, e.g. a crate tarball).

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let version = if commit.is_empty() {
        env!("CARGO_PKG_VERSION").to_owned()
    } else {
        format!("{} ({commit})", env!("CARGO_PKG_VERSION"))
    };
    println!("cargo:rustc-env=CORDIS_VERSION={version}");
    // A new commit moves HEAD's branch; a checkout moves HEAD.
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-changed=.git/packed-refs");
}
