//! Claims: names that at most one entry may own (a tool, a service, a prompt section, an
//! override), and the rule that decides a name two entries claim.
//!
//! A claim is held by an *owner*: the nearest scope at or above the claiming one that has a
//! label (the loader labels each entry's scope with its id), so an entry's hidden children claim
//! for the entry. Holding a claim is an effect of the claiming scope; it is released when that
//! scope unwinds.
//!
//! # Determinism
//! A name held by two or more owners is **contested**: whoever holds it uses it only while it is
//! uncontested (the registry withholds a contested tool, the service table a contested service),
//! and every holder reports the same conflict, naming all holders in sorted order. When holders
//! leave until one remains, that one is released to use it. So the outcome is a function of the
//! set of holders, never of who claimed first.
//!
//! Where a plugin knows its claims from its config alone it states them in
//! [`crate::Plugin::claims`], and a host refuses two entries claiming one name before anything
//! loads; run-time claims ([`Context::claim`]) decide what only run time can know.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::context::{Context, Shared};
use crate::effect::{EffectHandle, EffectKind, EffectLabel};
use crate::scope::{AddError, ScopeId, ScopeNode, lock};

/// One name of one kind that at most one entry may own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Claim {
    /// What kind of name: `service`, `tool`, `section`, `override`, `mcp server`, ….
    pub kind: Cow<'static, str>,
    /// The layer the name lives in, when names of the kind are per layer (a tool registry's
    /// realm); `None` for the one shared space.
    pub space: Option<u64>,
    /// The name.
    pub name: String,
}

impl Claim {
    /// A claim of `name` of `kind` in the shared space.
    pub fn new(kind: impl Into<Cow<'static, str>>, name: impl Into<String>) -> Claim {
        Claim {
            kind: kind.into(),
            space: None,
            name: name.into(),
        }
    }

    /// The service `name` (what [`crate::Plugin::provides`] states).
    pub fn service(name: impl Into<String>) -> Claim {
        Claim::new("service", name)
    }

    /// The tool `name`.
    pub fn tool(name: impl Into<String>) -> Claim {
        Claim::new("tool", name)
    }

    /// The prompt section `name`.
    pub fn section(name: impl Into<String>) -> Claim {
        Claim::new("section", name)
    }

    /// The one override of `what` (a persona, a tool order, a presentation) in a space.
    pub fn override_of(what: impl Into<String>) -> Claim {
        Claim::new("override", what)
    }

    /// The same claim in layer `space`.
    #[must_use]
    pub fn in_space(mut self, space: Option<u64>) -> Claim {
        self.space = space;
        self
    }
}

/// `tool "echo"`: the kind and the name (the layer is where the claimants are, not a word a
/// person can act on).
impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} \"{}\"", self.kind, self.name)
    }
}

/// `a`, `a and b`, `a, b and c`.
pub fn prose_list<S: AsRef<str>>(items: &[S]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_owned(),
        [init @ .., last] => {
            let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
            format!("{} and {}", init.join(", "), last.as_ref())
        }
    }
}

/// `"a"`, `"a" and "b"`, `"a", "b" and "c"`.
pub fn quoted_list<S: AsRef<str>>(names: &[S]) -> String {
    let quoted: Vec<String> = names
        .iter()
        .map(|n| format!("\"{}\"", n.as_ref()))
        .collect();
    prose_list(&quoted)
}

/// The conflict text every holder of contested claims reports (claims and holders sorted).
pub fn conflict_message<S: AsRef<str>>(claims: &[&Claim], holders: &[S]) -> String {
    let listed: Vec<String> = claims.iter().map(ToString::to_string).collect();
    let (verb, them) = if claims.len() == 1 {
        ("is", "it")
    } else {
        ("are", "them")
    };
    format!(
        "{} {verb} claimed by entries {}, so none of them gets {them}; \
         remove {them} from all but one (or disable all but one of the entries)",
        listed.join(", "),
        quoted_list(holders)
    )
}

/// One holder of a claim: an entry (a labelled scope) or, outside any, the scope itself.
#[derive(Debug, Clone)]
struct Holder {
    owner: ScopeId,
    label: Arc<str>,
    /// How many live claims of this owner on the name (several scopes of one entry may hold it).
    count: usize,
}

/// The holders of one claim, in no particular order (every answer sorts what it reads). The
/// first is inline: a name with one holder, the usual case, allocates nothing for its list.
#[derive(Debug)]
struct Holders {
    first: Holder,
    more: Vec<Holder>,
}

impl Holders {
    fn len(&self) -> usize {
        1 + self.more.len()
    }

    fn iter(&self) -> impl Iterator<Item = &Holder> {
        std::iter::once(&self.first).chain(&self.more)
    }

    fn contains(&self, owner: ScopeId) -> bool {
        self.iter().any(|h| h.owner == owner)
    }

    /// Adds one hold of `owner`.
    fn add(&mut self, owner: ScopeId, label: &Arc<str>) {
        if self.first.owner == owner {
            self.first.count += 1;
        } else if let Some(h) = self.more.iter_mut().find(|h| h.owner == owner) {
            h.count += 1;
        } else {
            self.more.push(Holder {
                owner,
                label: label.clone(),
                count: 1,
            });
        }
    }

    /// Removes one hold of `owner`; false when that was the last hold of the last holder (the
    /// list is then stale and must go).
    fn remove(&mut self, owner: ScopeId) -> bool {
        if self.first.owner == owner {
            self.first.count -= 1;
            if self.first.count == 0 {
                match self.more.pop() {
                    Some(next) => self.first = next,
                    None => return false,
                }
            }
        } else if let Some(at) = self.more.iter().position(|h| h.owner == owner) {
            self.more[at].count -= 1;
            if self.more[at].count == 0 {
                self.more.swap_remove(at);
            }
        }
        true
    }
}

/// Every live claim with its holders, and the set of contested claims, sorted.
///
/// A hash map, not a B-tree: holding and releasing a claim (two per tool, section or service
/// of every entry of every boot) is one hash and one compare, where ordered keys cost a string
/// compare per tree level. Nothing iterates it; every answer that lists claims reads the sorted
/// `contested` set instead, so its order never reaches an output.
#[derive(Default)]
pub(crate) struct ClaimTable {
    held: FxHashMap<Arc<Claim>, Holders>,
    /// The claims with two or more holders, sorted: all a conflict report reads, so while no
    /// claim is contested, no owner is in a conflict and asking costs nothing.
    contested: BTreeSet<Arc<Claim>>,
}

impl ClaimTable {
    /// Adds one hold; true when the conflict its holders report changed (a second or later
    /// owner came).
    fn add(&mut self, claim: &Arc<Claim>, owner: ScopeId, label: &Arc<str>) -> bool {
        match self.held.entry(claim.clone()) {
            Entry::Vacant(slot) => {
                slot.insert(Holders {
                    first: Holder {
                        owner,
                        label: label.clone(),
                        count: 1,
                    },
                    more: Vec::new(),
                });
                false
            }
            Entry::Occupied(mut slot) => {
                let holders = slot.get_mut();
                let before = holders.len();
                holders.add(owner, label);
                let after = holders.len();
                if before == 1 && after == 2 {
                    self.contested.insert(claim.clone());
                }
                after > before
            }
        }
    }

    /// Removes one hold; true when the conflict its holders report changed (an owner of a
    /// contested claim left).
    fn remove(&mut self, claim: &Claim, owner: ScopeId) -> bool {
        let Some(holders) = self.held.get_mut(claim) else {
            return false;
        };
        let before = holders.len();
        if !holders.remove(owner) {
            self.held.remove(claim);
            return false;
        }
        let after = holders.len();
        if before == 2 && after == 1 {
            self.contested.remove(claim);
        }
        after < before && before > 1
    }

    fn labels(&self, claim: &Claim) -> Vec<String> {
        let mut labels: Vec<String> = self
            .held
            .get(claim)
            .map(|h| h.iter().map(|o| String::from(&*o.label)).collect())
            .unwrap_or_default();
        labels.sort();
        labels
    }

    /// True while two or more owners hold `claim`.
    fn is_contested(&self, claim: &Claim) -> bool {
        self.held.get(claim).is_some_and(|h| h.len() > 1)
    }

    /// The conflicts `owner` is part of: one text per set of holders, claims sorted.
    fn conflicts_of(&self, owner: ScopeId) -> Vec<String> {
        if self.contested.is_empty() {
            return Vec::new();
        }
        let mut by_holders: BTreeMap<Vec<String>, Vec<&Claim>> = BTreeMap::new();
        for claim in &self.contested {
            if self.held.get(&**claim).is_some_and(|h| h.contains(owner)) {
                by_holders
                    .entry(self.labels(claim))
                    .or_default()
                    .push(claim);
            }
        }
        by_holders
            .iter()
            .map(|(holders, claims)| conflict_message(claims, holders))
            .collect()
    }
}

impl ScopeNode {
    /// The scope that owns this one's claims, and the label they are held under: the nearest
    /// labelled scope at or above it, else this scope (computed when the scope was made).
    pub(crate) fn claim_owner(&self) -> (ScopeId, &Arc<str>) {
        match &self.labelled_owner {
            Some((owner, label)) => (*owner, label),
            None => (self.id, &self.name),
        }
    }
}

impl Shared {
    /// The conflicts the owner scope `owner` is part of (see [`crate::ScopeInfo::conflicts`]).
    pub(crate) fn conflicts_of(&self, owner: ScopeId) -> Vec<String> {
        lock(&self.claims).conflicts_of(owner)
    }

    /// Holds `claim` for `node`'s owner and returns the owner. When that changes a conflict, what
    /// its holders report changes: status waiters are woken then, and only then.
    pub(crate) fn hold(&self, node: &ScopeNode, claim: &Arc<Claim>) -> ScopeId {
        let (owner, label) = node.claim_owner();
        if lock(&self.claims).add(claim, owner, label) {
            self.status_changed();
        }
        owner
    }

    /// Releases one hold of `claim` by `owner`, waking status waiters if that changed a
    /// conflict.
    pub(crate) fn release(&self, claim: &Claim, owner: ScopeId) {
        if lock(&self.claims).remove(claim, owner) {
            self.status_changed();
        }
    }

    /// The labels of every owner holding `claim`, sorted.
    pub(crate) fn holders(&self, claim: &Claim) -> Vec<String> {
        lock(&self.claims).labels(claim)
    }

    /// True while two or more owners hold `claim` (what `holders(claim).len() > 1` says,
    /// without the list).
    pub(crate) fn contested(&self, claim: &Claim) -> bool {
        lock(&self.claims).is_contested(claim)
    }
}

impl Context {
    /// Holds `claim` for this scope's entry (see the [`Claim`](crate::Claim) docs) until the
    /// returned effect is disposed or the scope unwinds. Claiming never fails: a name another
    /// entry holds too becomes contested, which both entries report (see
    /// [`crate::ScopeInfo::conflicts`]), and whoever grants the name must withhold it while
    /// [`Context::is_contested`] says so.
    pub fn claim(&self, claim: Claim) -> EffectHandle {
        if self.node.observing() {
            self.node
                .note_names(crate::observe::Note::Write(claim.clone()));
        }
        let shared = &self.node.shared;
        // One allocation shared by the table's key, the undo and the effect's label (which is
        // the claim, formatted only if the undo panics).
        let claim = Arc::new(claim);
        let label = EffectLabel::Claim(claim.clone());
        let added =
            self.node
                .add_labelled_effect::<()>(self.generation, EffectKind::Custom, label, || {
                    let owner = shared.hold(&self.node, &claim);
                    let weak = Arc::downgrade(shared);
                    Ok(Box::new(move || {
                        if let Some(shared) = weak.upgrade() {
                            shared.release(&claim, owner);
                        }
                    }))
                });
        match added {
            Ok(id) => EffectHandle::new(&self.node, id),
            Err(AddError::Gone | AddError::Refused(())) => EffectHandle::inert(),
        }
    }

    /// The scope this scope's claims are held for: the nearest labelled scope at or above it
    /// (an entry), else this scope. Two registrations with one owner are one entry's.
    pub fn claim_owner(&self) -> ScopeId {
        self.node.claim_owner().0
    }

    /// The entries holding `claim`, sorted (more than one: it is contested).
    pub fn claim_holders(&self, claim: &Claim) -> Vec<String> {
        self.node.shared.holders(claim)
    }

    /// True while two or more entries hold `claim`.
    pub fn is_contested(&self, claim: &Claim) -> bool {
        self.node.shared.contested(claim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;
    use crate::testing::both_runtimes;
    use crate::{FnPlugin, PluginOptions, Prepared};

    fn entry(root: &Context, label: &str) -> ScopeHandle {
        root.plugin_with(
            Prepared::new(FnPlugin::new(label, |_, ()| async { Ok(()) }), ()),
            PluginOptions {
                label: Some(label.to_owned()),
                ..PluginOptions::default()
            },
        )
    }

    both_runtimes! {
        async fn a_name_two_entries_claim_is_contested_for_both_and_released_to_the_survivor() {
            let root = Context::root();
            let one = entry(&root, "one");
            let two = entry(&root, "two");
            root.idle().await;
            let (c1, c2) = (one.context().unwrap(), two.context().unwrap());
            let echo = Claim::tool("echo");
            let _h1 = c1.claim(echo.clone());
            assert!(!root.is_contested(&echo));
            assert!(one.info().conflicts.is_empty());
            // Claimed twice by one entry (a hidden child of it): still one owner.
            let _child = c1.claim(echo.clone());
            assert!(!root.is_contested(&echo));
            let _h2 = c2.claim(echo.clone());
            assert!(root.is_contested(&echo));
            assert_eq!(root.claim_holders(&echo), ["one", "two"]);
            let expected = "tool \"echo\" is claimed by entries \"one\" and \"two\", so none of them gets it; remove it from all but one (or disable all but one of the entries)";
            assert_eq!(one.info().conflicts, [expected]);
            assert_eq!(two.info().conflicts, [expected]);
            two.dispose();
            assert!(!root.is_contested(&echo));
            assert!(one.info().conflicts.is_empty());
            root.dispose();
            assert!(root.live().is_zero());
        }
    }

    both_runtimes! {
        async fn a_name_stays_contested_until_one_holder_is_left() {
            let root = Context::root();
            let entries: Vec<ScopeHandle> =
                ["one", "two", "three"].iter().map(|l| entry(&root, l)).collect();
            root.idle().await;
            let echo = Claim::tool("echo");
            let other = Claim::tool("other");
            let _held: Vec<EffectHandle> = entries
                .iter()
                .map(|e| e.context().unwrap().claim(echo.clone()))
                .collect();
            let _other = entries[2].context().unwrap().claim(other.clone());
            assert_eq!(entries[0].info().conflicts.len(), 1);
            // Three holders, one leaves: the other two still contest it.
            entries[2].dispose();
            assert!(root.is_contested(&echo));
            assert_eq!(root.claim_holders(&other), Vec::<String>::new());
            let expected = "tool \"echo\" is claimed by entries \"one\" and \"two\", so none of them gets it; remove it from all but one (or disable all but one of the entries)";
            assert_eq!(entries[0].info().conflicts, [expected]);
            assert_eq!(entries[1].info().conflicts, [expected]);
            entries[1].dispose();
            assert!(entries[0].info().conflicts.is_empty());
            // Contested again by a newcomer.
            let four = entry(&root, "four");
            root.idle().await;
            let _four = four.context().unwrap().claim(echo.clone());
            assert_eq!(entries[0].info().conflicts.len(), 1);
            root.dispose();
            assert!(root.live().is_zero());
        }
    }

    both_runtimes! {
        async fn conflicts_group_by_holders_with_claims_sorted_and_a_hidden_child_claims_for_its_entry() {
            let root = Context::root();
            let entries: Vec<ScopeHandle> =
                ["c", "a", "b"].iter().map(|l| entry(&root, l)).collect();
            root.idle().await;
            let (c, a, b) = (&entries[0], &entries[1], &entries[2]);
            // A hidden child of `a` (and a child of that) holds for `a`, not for itself.
            let hidden = a.context().unwrap().child_scope("hidden");
            let deeper = hidden.context().unwrap().child_scope("deeper");
            let hctx = deeper.context().unwrap();
            assert_eq!(hctx.claim_owner(), a.id());
            // Outside every entry a scope holds for itself, under its name.
            let loose = root.child_scope("loose").context().unwrap();
            let inner = loose.child_scope("inner");
            assert_eq!(loose.claim_owner(), loose.scope_id());
            assert_eq!(inner.context().unwrap().claim_owner(), inner.id());
            let _loose = loose.claim(Claim::tool("loose"));
            assert_eq!(root.claim_holders(&Claim::tool("loose")), ["loose"]);
            let bctx = b.context().unwrap();
            let cctx = c.context().unwrap();
            let mut held = Vec::new();
            for claim in [Claim::tool("z"), Claim::section("x"), Claim::tool("y")] {
                held.push(hctx.claim(claim.clone()));
                held.push(bctx.claim(claim));
            }
            held.push(cctx.claim(Claim::tool("w")));
            held.push(hctx.claim(Claim::tool("w")));
            // Uncontested claims of their own do not show.
            held.push(bctx.claim(Claim::tool("solo")));
            assert!(!root.is_contested(&Claim::tool("solo")));
            assert!(root.is_contested(&Claim::tool("w")));
            assert_eq!(root.claim_holders(&Claim::tool("w")), ["a", "c"]);
            let tail = "so none of them gets them; remove them from all but one (or disable all but one of the entries)";
            let ab = format!("section \"x\", tool \"y\", tool \"z\" are claimed by entries \"a\" and \"b\", {tail}");
            let ac = "tool \"w\" is claimed by entries \"a\" and \"c\", so none of them gets it; remove it from all but one (or disable all but one of the entries)";
            assert_eq!(a.info().conflicts, [ab.as_str(), ac]);
            assert_eq!(a.outcome().conflicts, a.info().conflicts);
            assert_eq!(b.info().conflicts, [ab.as_str()]);
            assert_eq!(c.info().conflicts, [ac]);
            // The hidden scopes report nothing of their own: their entry does.
            assert!(deeper.info().conflicts.is_empty());
            // `a` leaving a claim twice held by one owner: one hold goes, the claim stays.
            held.push(hctx.claim(Claim::tool("w")));
            held.pop().unwrap().dispose();
            assert_eq!(c.info().conflicts, [ac]);
            hidden.dispose();
            assert!(c.info().conflicts.is_empty());
            assert!(b.info().conflicts.is_empty());
            assert_eq!(root.claim_holders(&Claim::tool("z")), ["b"]);
            root.dispose();
            assert!(root.live().is_zero());
        }
    }

    #[test]
    fn lists_read_as_prose() {
        assert_eq!(quoted_list::<&str>(&[]), "");
        assert_eq!(quoted_list(&["a"]), "\"a\"");
        assert_eq!(quoted_list(&["a", "b", "c"]), "\"a\", \"b\" and \"c\"");
    }
}
