//! What changed under the sessions' feet, for the surfaces that tell
//! clients: resources guests announced (`client.resource-updated` →
//! `notifications/resources/updated`, to subscribed sessions) and the lists
//! a reload changed (`notifications/{tools,prompts,resources}/list_changed`,
//! to every session with an open stream). Also counts the lists guests said
//! changed (`client.announce-list-changed`): the reloader watches the count
//! and lists the guests again.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use tokio::sync::{broadcast, watch};

use super::toolset::Toolset;

/// Changes waiting for a slow subscriber before the oldest are skipped.
const BACKLOG: usize = 1024;

/// One change on the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The resource with this URI changed.
    Updated(String),
    /// A reload changed this list where [`Reach`] says.
    ListChanged(List, Reach),
    /// A task's status changed (2026-07-28 `notifications/tasks`): its id,
    /// the digest of the credentials that own it, and the task as
    /// `tasks/get` shows it now.
    Task {
        id: String,
        owner: String,
        detail: serde_json::Value,
    },
}

/// A list a client may hold and re-fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Tools,
    Prompts,
    Resources,
}

impl List {
    /// The MCP notification that says this list changed.
    pub fn notification(self) -> &'static str {
        match self {
            List::Tools => "notifications/tools/list_changed",
            List::Prompts => "notifications/prompts/list_changed",
            List::Resources => "notifications/resources/list_changed",
        }
    }
}

/// The endpoints where a changed list looks different: the whole
/// catalog's (`None`: `/mcp`, stdio) and each toolset's (`/mcp/NAME`). A
/// session hears a `list_changed` only when its own endpoint's list
/// changed, so a client of one toolset is not sent to re-list for a tool
/// it cannot see.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reach(Arc<BTreeSet<Option<Toolset>>>);

impl Reach {
    pub fn new(endpoints: impl IntoIterator<Item = Option<Toolset>>) -> Reach {
        Reach(Arc::new(endpoints.into_iter().collect()))
    }

    /// Whether the list served through `toolset` (`None`: the whole
    /// catalog) changed.
    pub fn reaches(&self, toolset: Option<&Toolset>) -> bool {
        self.0.contains(&toolset.cloned())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Told of each resource update announced here, to pass it on to other
/// processes (`[cluster]`: the other replicas). It must not block.
pub type Forward = Arc<dyn Fn(&str) + Send + Sync>;

/// The server-wide channel of changes. Cloning shares it.
#[derive(Clone)]
pub struct ResourceChanges {
    tx: broadcast::Sender<Change>,
    forward: Arc<OnceLock<Forward>>,
    /// How many list changes guests announced.
    relist: Arc<watch::Sender<u64>>,
}

impl std::fmt::Debug for ResourceChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceChanges")
            .field("forwarded", &self.forward.get().is_some())
            .field("relists", &*self.relist.borrow())
            .finish()
    }
}

impl Default for ResourceChanges {
    fn default() -> Self {
        ResourceChanges {
            tx: broadcast::channel(BACKLOG).0,
            forward: Arc::default(),
            relist: Arc::new(watch::channel(0).0),
        }
    }
}

impl ResourceChanges {
    /// Announces that `uri` changed; nobody listening is fine. It is passed
    /// on to other processes too, when something forwards updates.
    pub fn updated(&self, uri: &str) {
        let _ = self.tx.send(Change::Updated(uri.to_string()));
        if let Some(forward) = self.forward.get() {
            forward(uri);
        }
    }

    /// Announces here an update another process announced (not passed on).
    pub fn updated_elsewhere(&self, uri: &str) {
        let _ = self.tx.send(Change::Updated(uri.to_string()));
    }

    /// Passes every update announced here to `forward` (set once; later
    /// calls change nothing).
    pub fn forward_to(&self, forward: Forward) {
        let _ = self.forward.set(forward);
    }

    /// Announces a task's new state; nobody listening is fine.
    pub fn task(&self, id: &str, owner: &str, detail: serde_json::Value) {
        let _ = self.tx.send(Change::Task {
            id: id.to_string(),
            owner: owner.to_string(),
            detail,
        });
    }

    /// Announces that a reload changed `list` at the endpoints `reach` names.
    pub fn list_changed(&self, list: List, reach: Reach) {
        let _ = self.tx.send(Change::ListChanged(list, reach));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }

    /// A guest says one of its lists changed: counted for the reloader,
    /// which lists the guests again and tells clients of every list that
    /// differs (so which list the guest named is not kept).
    pub fn relist(&self) {
        self.relist.send_modify(|n| *n += 1);
    }

    /// The count of announced list changes, to watch.
    pub fn relists(&self) -> watch::Receiver<u64> {
        self.relist.subscribe()
    }
}
