//! Calls: answers, limits, traps, and that the next call is answered after each.

use std::time::Duration;

use cordis_wasm::{CallError, Capabilities, Limits};

use crate::guests::{self, OBJECT, Spec, Tool};
use crate::{block_on, runner};

/// Tool `spin` loops forever, tool `grow` grows memory forever, tool `echo` answers its
/// arguments.
fn hostile() -> Spec {
    Spec {
        tools: vec![
            Tool {
                name: "spin",
                description: "Loops.",
                parameters: OBJECT,
                effect: 0,
            },
            Tool {
                name: "grow",
                description: "Grows.",
                parameters: OBJECT,
                effect: 0,
            },
            Tool {
                name: "echo",
                description: "Echoes.",
                parameters: OBJECT,
                effect: 0,
            },
        ],
        call: r#"
    (if (i32.eq (i32.load8_u (local.get $np)) (i32.const 115)) (then (loop $forever (br $forever))))
    (if (i32.eq (i32.load8_u (local.get $np)) (i32.const 103))
      (then (loop $more (drop (memory.grow (i32.const 16))) (br $more))))
    (call $ok (local.get $ap) (local.get $al))"#
            .to_owned(),
        ..Spec::default()
    }
}

#[test]
fn hello_answers_and_a_call_without_a_name_fails_alone() {
    let r = runner(
        &guests::hello(),
        Limits::default(),
        Capabilities::default(),
        None,
    );
    block_on(async {
        let tools = r.describe().await.unwrap();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "wasm_hello");
        assert_eq!(tools[0].parameters["required"][0], "name");
        assert_eq!(
            r.call("wasm_hello", r#"{"name": "Ada"}"#).await.unwrap(),
            r#"{"greeting":"Hello, Ada!"}"#
        );
        let failed = r.call("wasm_hello", "{}").await.unwrap_err();
        assert_eq!(
            failed,
            CallError::Failed("expected {\"name\": \"…\"}".to_owned())
        );
        // A failed call keeps the instance: still the first store.
        assert_eq!(
            r.call("wasm_hello", r#"{"name":"Bo"}"#).await.unwrap(),
            r#"{"greeting":"Hello, Bo!"}"#
        );
        assert_eq!(r.generations(), 1);
    });
}

#[test]
fn an_infinite_loop_is_stopped_by_fuel_and_the_next_call_is_answered() {
    let limits = Limits {
        fuel: 2_000_000,
        ..Limits::default()
    };
    let r = runner(&hostile(), limits, Capabilities::default(), None);
    block_on(async {
        for _ in 0..3 {
            let e = r.call("spin", "{}").await.unwrap_err();
            assert_eq!(e, CallError::OutOfFuel { fuel: 2_000_000 });
            assert!(
                e.to_string()
                    .contains("out of fuel (2000000 units per call"),
                "{e}"
            );
            assert_eq!(r.call("echo", r#"{"a":1}"#).await.unwrap(), r#"{"a":1}"#);
        }
        // Each stopped call poisoned its instance: 3 rebuilds after the first store.
        assert_eq!(r.generations(), 4);
    });
}

#[test]
fn an_infinite_loop_with_unbounded_fuel_is_stopped_by_the_deadline() {
    let limits = Limits {
        fuel: u64::MAX,
        ..Limits::default()
    };
    let mut r = runner(&hostile(), limits, Capabilities::default(), None);
    r = rebuild_with_deadline(r, Duration::from_millis(50));
    block_on(async {
        let e = r.call("spin", "{}").await.unwrap_err();
        assert_eq!(e, CallError::Deadline { ms: 50 });
        assert_eq!(r.call("echo", "[]").await.unwrap(), "[]");
    });
}

fn rebuild_with_deadline(r: cordis_wasm::Runner, deadline: Duration) -> cordis_wasm::Runner {
    let guest = r.guest().clone();
    cordis_wasm::Runner::new(
        guest,
        cordis_wasm::RunnerOptions {
            entry: "test".into(),
            limits: Limits {
                fuel: u64::MAX,
                ..Limits::default()
            },
            grants: Capabilities::default(),
            workspace: None,
            config: "{}".to_owned(),
            seed: None,
            deadline,
        },
    )
}

#[test]
fn growing_memory_past_the_limit_is_refused_and_the_next_call_is_answered() {
    let limits = Limits {
        memory_bytes: 4 << 20,
        ..Limits::default()
    };
    let r = runner(&hostile(), limits, Capabilities::default(), None);
    block_on(async {
        let e = r.call("grow", "{}").await.unwrap_err();
        let CallError::Limit(why) = &e else {
            panic!("{e:?}")
        };
        // 2 pages at start, +16 pages (1 MiB) per grow: the grow from 3.125 MiB to 4.125 MiB
        // is the one refused.
        assert!(why.starts_with("memory limit of 4 MiB reached"), "{why}");
        assert!(why.contains("to 4325376 bytes"), "{why}");
        assert_eq!(r.call("echo", "{}").await.unwrap(), "{}");
    });
}

#[test]
fn a_trap_fails_that_call_only() {
    let r = runner(
        &guests::trap_and_echo(),
        Limits::default(),
        Capabilities::default(),
        None,
    );
    block_on(async {
        assert_eq!(r.call("echo", "1").await.unwrap(), "1");
        let e = r.call("boom", "{}").await.unwrap_err();
        let CallError::Trap(why) = &e else {
            panic!("{e:?}")
        };
        assert!(why.contains("unreachable"), "{why}");
        assert_eq!(r.call("echo", "2").await.unwrap(), "2");
        assert_eq!(r.generations(), 2);
    });
}

#[test]
fn a_dropped_call_poisons_nothing_the_next_call_sees() {
    let r = runner(
        &hostile(),
        Limits {
            fuel: u64::MAX,
            ..Limits::default()
        },
        Capabilities::default(),
        None,
    );
    block_on(async {
        // The spinning call yields every 100,000 units of fuel: a timeout can drop it.
        let dropped = tokio::time::timeout(Duration::from_millis(20), r.call("spin", "{}")).await;
        assert!(dropped.is_err());
        assert_eq!(r.call("echo", "3").await.unwrap(), "3");
        assert_eq!(r.generations(), 2);
    });
}

#[test]
fn a_seed_replays_granted_randomness_byte_for_byte() {
    let grants = Capabilities {
        random: true,
        ..Capabilities::default()
    };
    let draw = |seed: u64| {
        let r = runner(
            &guests::random(),
            Limits::default(),
            grants.clone(),
            Some(seed),
        );
        block_on(async {
            let a = r.call("dice", "{}").await.unwrap();
            let b = r.call("dice", "{}").await.unwrap();
            (a, b)
        })
    };
    let (a, b) = draw(7);
    assert_eq!(a.len(), r#"{"random":""}"#.len() + 32, "{a}");
    assert_ne!(a, b, "two calls draw different numbers");
    assert_eq!(draw(7), (a.clone(), b), "seed 7 replays");
    assert_ne!(draw(8).0, a, "another seed draws another number");
    // Unseeded: the operating system's entropy.
    let r = runner(&guests::random(), Limits::default(), grants, None);
    let (x, y) = block_on(async {
        (
            r.call("dice", "{}").await.unwrap(),
            r.call("dice", "{}").await.unwrap(),
        )
    });
    assert_ne!(x, y);
}
