//! User input never panics: arbitrary text and mutated configs through parsing and resolution.

use cordis_host::Builtins;
use cordis_host::plan::{PlanOptions, load_plan};
use proptest::prelude::*;

const GOOD: &str = include_str!("../../../cordis.yml");

fn resolve(src: &str) {
    let env = |name: &str| (name == "SET").then(|| "value".to_owned());
    let _ = load_plan(
        src,
        "fuzz.yml",
        &env,
        &Builtins::host(),
        &PlanOptions::default(),
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(src in "\\PC{0,200}") {
        resolve(&src);
    }

    #[test]
    fn yaml_shaped_text_never_panics(
        src in "(- |  |id: |name: |config: |\\{|\\}|\\[|\\]|!!js |!!str |!!binary |!<tag:x> |&a |\\*a |\\$\\{\\{ env\\.[A-Z😀]{0,3} (\\?\\? 'x')? \\}\\}|😀|～|\u{202e}|\u{feff}|#|\"|'|\n|\r|:|,|[a-z/-]{1,8}){0,60}"
    ) {
        resolve(&src);
    }

    #[test]
    fn nested_anchors_and_aliases_never_panic_or_blow_up(
        depth in 1usize..12, width in 1usize..12, alias_first in any::<bool>()
    ) {
        // Every level aliases the previous one `width` times: up to 11^11 nodes if expanded.
        let mut src = String::from("- id: a\n  name: debug/noop\n  config:\n    l0: &l0 [x]\n");
        for level in 1..depth {
            let items = vec![format!("*l{}", level - 1); width].join(", ");
            src.push_str(&format!("    l{level}: &l{level} [{items}]\n"));
        }
        if alias_first {
            src.push_str("    z: *l0\n");
        }
        resolve(&src);
    }

    #[test]
    fn the_bundled_config_with_a_byte_range_replaced_never_panics(
        at in 0usize..4000, len in 0usize..40, with in "\\PC{0,12}"
    ) {
        let chars: Vec<char> = GOOD.chars().collect();
        let at = at.min(chars.len());
        let end = (at + len).min(chars.len());
        let mut mutated: String = chars[..at].iter().collect();
        mutated.push_str(&with);
        mutated.extend(&chars[end..]);
        resolve(&mutated);
    }
}
