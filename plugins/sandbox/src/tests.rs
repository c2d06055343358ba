use super::*;

#[test]
fn a_kernel_that_does_not_enforce_the_rules_refuses_the_command_and_says_how_to_choose() {
    let e = rules::enforced(SandboxMode::WorkspaceWrite, None).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("the workspace-write sandbox cannot be enforced: "),
        "{text}"
    );
    assert!(text.contains("set `sandbox: full-access`"), "{text}");
    let fd = std::fs::File::open("/dev/null").unwrap();
    assert!(rules::enforced(SandboxMode::ReadOnly, Some(fd.into())).is_ok());
}

#[test]
fn only_a_sandboxed_mode_without_network_is_confined() {
    let sandbox = |mode, network| Sandbox {
        mode,
        network,
        workspace: "/w".into(),
        writable: Vec::new(),
        temp: "/t".into(),
    };
    assert!(sandbox(SandboxMode::WorkspaceWrite, false).is_confined());
    assert!(sandbox(SandboxMode::ReadOnly, false).is_confined());
    assert!(!sandbox(SandboxMode::WorkspaceWrite, true).is_confined());
    assert!(!sandbox(SandboxMode::FullAccess, false).is_confined());
}
