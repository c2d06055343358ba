//! The `mcp` plugin's service API: the connected servers under a scope, each with its prompts
//! and resources ([`servers`], [`McpServer`]).
//!
//! # Why a directory and not a runtime service
//! A runtime service has one provider per name, and every `mcp` entry is a provider of the
//! same kind: published as services, two entries would contest the name and hide each other.
//! So each entry lists itself here, keyed by its runtime and its parent scope, as a labelled
//! effect of its scope ("mcp directory listing") that disposal removes.
//!
//! # Determinism
//! [`servers`] is sorted by server name, and a name two live entries share under one parent
//! (their claim is contested) is left out, whichever started first: the answer is a function of
//! the set of entries. So is a prompt whose command name another entry's prompt makes too
//! ([`McpServer::prompts`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};

use cordis_runtime::{Context, ScopeId};

use crate::catalog::{
    PromptInfo, PromptMessages, ResourceContent, ResourceInfo, ResourceTemplateInfo,
};
use crate::error::McpError;
use crate::link::Link;

struct Listing {
    runtime: u64,
    parent: Option<ScopeId>,
    entry: ScopeId,
    link: Weak<Link>,
}

static DIRECTORY: Mutex<Vec<Listing>> = Mutex::new(Vec::new());

/// Lists the entry of `ctx` (an `mcp` entry's context) until its scope ends.
pub(crate) fn enlist(ctx: &Context, link: &Arc<Link>) {
    let (runtime, parent, entry) = (ctx.runtime_id(), ctx.parent_id(), ctx.scope_id());
    crate::lock(&DIRECTORY).push(Listing {
        runtime,
        parent,
        entry,
        link: Arc::downgrade(link),
    });
    let _ = ctx.effect("mcp directory listing", move || {
        crate::lock(&DIRECTORY).retain(|l| !(l.runtime == runtime && l.entry == entry));
    });
}

/// The `mcp` servers whose entries are children of `scope` (the root context for the
/// top-level entries, an ACP session's scope for its servers), sorted by server name; a name
/// two entries share is left out.
///
/// # Determinism
/// See the module docs.
pub fn servers(scope: &Context) -> Vec<McpServer> {
    let (runtime, parent) = (scope.runtime_id(), Some(scope.scope_id()));
    let mut by_name: BTreeMap<String, Vec<Arc<Link>>> = BTreeMap::new();
    for listing in crate::lock(&DIRECTORY)
        .iter()
        .filter(|l| l.runtime == runtime && l.parent == parent)
    {
        if let Some(link) = listing.link.upgrade() {
            by_name.entry(link.server.clone()).or_default().push(link);
        }
    }
    by_name
        .into_iter()
        .filter_map(|(name, mut links)| {
            (links.len() == 1).then(|| McpServer {
                name,
                link: links.remove(0),
            })
        })
        .collect()
}

/// One server's prompts and resources, as a front end uses them (prompts as commands,
/// resources as context to attach).
#[derive(Clone)]
pub struct McpServer {
    name: String,
    link: Arc<Link>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// The entry's `server` name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its prompts, by name (empty while disconnected or when it offers none), without those
    /// whose command name another entry's prompt makes too (`a`'s `b__c` and `a__b`'s `c` are
    /// both `/mcp__a__b__c`): a contested command is withheld from every view, and both
    /// entries report the conflict (see [`crate::prompt_command_claim`]).
    pub fn prompts(&self) -> Vec<PromptInfo> {
        let mut prompts = crate::lock(&self.link.catalog).prompts.clone();
        prompts.retain(|p| !self.link.prompt_contested(&p.name));
        prompts
    }

    /// Its resources, by URI.
    pub fn resources(&self) -> Vec<ResourceInfo> {
        crate::lock(&self.link.catalog).resources.clone()
    }

    /// Its resource templates, by URI template.
    pub fn resource_templates(&self) -> Vec<ResourceTemplateInfo> {
        crate::lock(&self.link.catalog).templates.clone()
    }

    /// `prompts/get` of a listed prompt with `arguments`.
    ///
    /// # Errors
    /// A prompt not listed, a missing required argument, a server that is not connected, or
    /// the server's error.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the request (the server is told it is cancelled).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<PromptMessages, McpError> {
        self.link.get_prompt(name, arguments).await
    }

    /// `resources/read` of `uri` (a listed URI or one a template yields).
    ///
    /// # Errors
    /// A URI over 8 KiB, a server that is not connected, or the server's error.
    ///
    /// # Cancel safety
    /// As [`Self::get_prompt`].
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContent>, McpError> {
        self.link.read_resource(uri).await
    }
}

/// The names of the servers listed under `scope` (for reports and tests).
pub fn server_names(scope: &Context) -> BTreeSet<String> {
    servers(scope).into_iter().map(|s| s.name).collect()
}
