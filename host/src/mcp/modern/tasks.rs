//! The tasks extension (`io.modelcontextprotocol/tasks`) for long-running
//! tool calls under protocol 2026-07-28.
//!
//! A tool marked `[[tools]] task = "optional"` or `"required"`, called by a
//! client whose `_meta` capabilities declare the extension, is answered at
//! once with a `CreateTaskResult` (`resultType: "task"`); the call runs on
//! in the background and its outcome is kept. The client polls `tasks/get`
//! (the result inlined when `completed`, the JSON-RPC error when `failed`),
//! may `tasks/cancel` it. A guest's question to the client (elicitation,
//! sampling, roots) parks the task in `input_required` with the question in
//! `inputRequests` until `tasks/update` answers it (see `task_input`). A
//! `required` tool called without the extension gets -32021 naming it.
//!
//! Task records live in the kv store (`[kv]`: embedded SQLite or Redis), in
//! a host namespace per owner, `hangar/tasks/<tag>`, with the task's `ttlMs`
//! as their TTL, so they outlive a restart and any replica sharing the
//! store answers `tasks/get`. The owner, for this quota, is the caller's
//! principal (the bearer token's, or the one the tool's auth check
//! accepts), or its client address (an IPv6 /64) when anonymous; each
//! keeps at most `[server] max_tasks_per_owner` tasks, so one filling its
//! quota blocks no other. The task id begins with the namespace's tag
//! (`<tag>.<uuid>`), which is how `tasks/get` finds it. A record names the process that runs it: a task still
//! `working` whose process is gone is reported `failed` (its work was lost).
//! Only the credentials that created a task (`Authorization`, `X-Api-Key`,
//! the OAuth subject) see it; to anyone else it is unknown (-32602).
//!
//! A `subscriptions/listen` naming `taskIds` (which needs the extension
//! declared) gets `notifications/tasks` with the task as `tasks/get` shows
//! it when one of them ends (completed, failed, cancelled) in this process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::result::complete;
use crate::mcp::jsonrpc::{self, RpcError};
use crate::mcp::methods::Method;
use hangar_config::ErrorStyle;
use hangar_core::call::{CallError, CancelToken, ErrorKind, ResourceChanges, Stage, ToolResult};
use hangar_core::kv::KvStore;

/// The extension's name, in capabilities.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// Where task records live in the kv store: `hangar/tasks/<tag>`, one
/// namespace per owner.
pub(super) const NAMESPACE: &str = "hangar/tasks";
/// Hex digits of an owner's tag.
pub(super) const TAG_LEN: usize = 16;
/// Where replicas sharing the store (`[cluster]`) say they are alive: one
/// key per process, kept fresh while it runs.
const BOOTS: &str = "hangar/task-boots";
/// How long a replica's liveness key lasts, and how often it is renewed.
const BOOT_TTL: std::time::Duration = std::time::Duration::from_secs(30);
const BOOT_RENEW: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a task is kept after it was created.
pub(super) const TTL_MS: u64 = 60 * 60 * 1000;
/// How often a client is asked to poll.
pub(super) const POLL_INTERVAL_MS: u64 = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Status {
    Working,
    /// A guest's question waits for the client (`inputRequests`, `tasks/update`).
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub(super) fn terminal(self) -> bool {
        !matches!(self, Status::Working | Status::InputRequired)
    }
}

/// One task as stored: its wire fields, who owns it and which process runs it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Record {
    pub(super) task_id: String,
    pub(super) status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) status_message: Option<String>,
    pub(super) created_at: String,
    pub(super) last_updated_at: String,
    pub(super) ttl_ms: u64,
    pub(super) poll_interval_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<Value>,
    /// The questions waiting for the client, by key (`input_required`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) input_requests: Option<Value>,
    /// Digest of the credentials that created the task.
    pub(super) owner: String,
    /// The process running it (a random id per start).
    pub(super) boot: String,
}

impl Record {
    /// The task as `tasks/get` shows it (without owner and process).
    pub(super) fn wire(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("records serialize");
        if let Some(obj) = v.as_object_mut() {
            obj.remove("owner");
            obj.remove("boot");
        }
        v
    }

    pub(super) fn set(&mut self, status: Status, message: Option<String>) {
        self.status = status;
        self.status_message = message;
        self.last_updated_at = now();
    }
}

pub(super) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The server's tasks: the store, and the cancel handles of those running here.
pub struct Tasks {
    store: Option<Arc<KvStore>>,
    pub(super) boot: String,
    /// Other processes share the store (`[cluster]`): a task another
    /// process runs is not lost just because this one did not start it.
    shared: bool,
    pub(super) running: Mutex<HashMap<String, CancelToken>>,
    /// Read-modify-write of a record is one at a time (a cancel and the
    /// end of the run must not overwrite each other).
    pub(super) writing: tokio::sync::Mutex<()>,
    /// Questions of running tasks waiting for `tasks/update`.
    pub(super) waiting: super::waiting::Waiting,
    /// Tasks one owner may have kept at once (`max_tasks_per_owner`).
    max_per_owner: u64,
}

impl Tasks {
    /// Tasks kept in `store`; without one, tools run as plain calls.
    pub fn new(store: Option<Arc<KvStore>>) -> Tasks {
        Tasks {
            store,
            boot: uuid::Uuid::new_v4().simple().to_string(),
            shared: false,
            running: Mutex::new(HashMap::new()),
            writing: tokio::sync::Mutex::new(()),
            waiting: Default::default(),
            max_per_owner: hangar_config::ServerConfig::default().max_tasks_per_owner,
        }
    }

    /// At most `max` tasks kept per owner.
    pub fn keep_per_owner(&mut self, max: u64) {
        self.max_per_owner = max.max(1);
    }

    /// Tasks in a store other replicas share: this process keeps a
    /// liveness key fresh (every 10 s, lasting 30 s), and a task left
    /// unfinished by a process whose key is gone is the one reported
    /// failed. Without this, any other process is a restarted one.
    pub fn shared_by_replicas(mut self) -> Tasks {
        self.shared = true;
        if let (Some(store), Ok(runtime)) =
            (self.store.clone(), tokio::runtime::Handle::try_current())
        {
            let boot = self.boot.clone();
            runtime.spawn(async move {
                let ttl = BOOT_TTL.as_millis() as u64;
                loop {
                    if let Err(e) = store.host_set(BOOTS, &boot, b"1".to_vec(), Some(ttl)).await {
                        tracing::warn!("tasks: cannot renew this replica's liveness: {e:?}");
                    }
                    tokio::time::sleep(BOOT_RENEW).await;
                }
            });
        }
        self
    }

    /// Whether the process `boot` still runs (only replicas can tell; a
    /// lone process that did not start a task outlived its runner).
    async fn alive(&self, boot: &str) -> bool {
        if !self.shared {
            return false;
        }
        let Some(store) = &self.store else {
            return false;
        };
        matches!(store.host_get(BOOTS, boot).await, Ok(Some(_)))
    }

    /// Whether tasks can be created (the kv store opened).
    pub fn available(&self) -> bool {
        self.store.is_some()
    }

    /// Stores `record` in its owner's namespace (named by its id), where a
    /// new one past `max_tasks_per_owner` is refused.
    pub(super) async fn put(&self, record: &Record) -> Result<(), RpcError> {
        let store = self.store.as_ref().ok_or_else(unavailable)?;
        let bytes = serde_json::to_vec(record).expect("records serialize");
        let ns = namespace(&record.task_id)
            .ok_or_else(|| RpcError::new(-32603, "tasks: a task id without its owner's tag"))?;
        let (id, ttl, max) = (&record.task_id, Some(record.ttl_ms), self.max_per_owner);
        match store.host_set_capped(&ns, id, bytes, ttl, max).await {
            Ok(()) => Ok(()),
            Err(hangar_core::kv::KvError::Quota(_)) => Err(RpcError {
                code: jsonrpc::SERVER_ERROR,
                message: format!(
                    "Too many tasks: at most {max} kept per caller (a task is kept for {} minutes after it was created)",
                    TTL_MS / 60_000
                ),
                data: Some(json!({ "max_tasks_per_owner": max })),
            }),
            Err(e) => Err(RpcError::new(
                -32603,
                format!("tasks: cannot store the task: {e:?}"),
            )),
        }
    }

    pub(super) async fn load(&self, id: &str) -> Result<Option<Record>, RpcError> {
        let store = self.store.as_ref().ok_or_else(unavailable)?;
        // An id without a tag is no task of this server.
        let Some(ns) = namespace(id) else {
            return Ok(None);
        };
        let bytes = store
            .host_get(&ns, id)
            .await
            .map_err(|e| RpcError::new(-32603, format!("tasks: cannot read the task: {e:?}")))?;
        Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
    }

    /// The task `id` as its owner may see it; a task left `working` by a
    /// process that is gone is settled as failed first.
    pub(super) async fn owned(&self, id: &str, owner: &str) -> Result<Record, RpcError> {
        let _writing = self.writing.lock().await;
        let mut record = match self.load(id).await? {
            Some(r) if r.owner == owner => r,
            _ => return Err(RpcError::invalid_params(format!("Unknown task: {id}"))),
        };
        if !record.status.terminal() && record.boot != self.boot && !self.alive(&record.boot).await
        {
            record.set(
                Status::Failed,
                Some("the server restarted while the task ran".into()),
            );
            record.error = Some(json!({
                "code": -32603,
                "message": "the server restarted while the task ran; its work was lost",
            }));
            self.put(&record).await?;
        }
        Ok(record)
    }

    /// Keeps the outcome of a run, unless the task was cancelled meanwhile,
    /// and tells listeners (`notifications/tasks`).
    pub(super) async fn settle(
        &self,
        id: &str,
        outcome: Result<ToolResult, CallError>,
        errors: ErrorStyle,
        changes: &ResourceChanges,
    ) {
        self.running.lock().unwrap().remove(id);
        self.waiting.forget(id);
        let _writing = self.writing.lock().await;
        let mut record = match self.load(id).await {
            Ok(Some(r)) if !r.status.terminal() => r,
            Ok(_) => return,
            Err(e) => return tracing::warn!(task = id, "{}", e.message),
        };
        record.input_requests = None;
        let complete = |r: &ToolResult| {
            let value = serde_json::to_value(r).expect("results serialize");
            complete(value, Method::ToolsCall, false)
        };
        match outcome {
            Ok(result) => {
                record.result = Some(complete(&result));
                record.set(Status::Completed, None);
            }
            Err(e) if e.kind == ErrorKind::Cancelled => {
                record.set(Status::Cancelled, Some("cancelled".into()));
            }
            // As a plain call would answer: past resolution, as a result.
            Err(e) if errors == ErrorStyle::Result && e.stage != Stage::Resolve => {
                record.result = Some(complete(&ToolResult::error(e.to_string())));
                record.set(Status::Completed, None);
            }
            Err(e) => {
                let error = RpcError::from(&e);
                record.error = Some(serde_json::to_value(&error).expect("errors serialize"));
                record.set(Status::Failed, Some(error.message));
            }
        }
        if let Err(e) = self.put(&record).await {
            // A result too large for the store: the task fails, saying so.
            record.result = None;
            record.error = Some(json!({ "code": e.code, "message": e.message }));
            record.set(Status::Failed, Some(e.message));
            if let Err(e) = self.put(&record).await {
                return tracing::warn!(task = id, "{}", e.message);
            }
        }
        changes.task(id, &record.owner, record.wire());
    }
}

/// The namespace of the task `id` (`<tag>.<uuid>`), from its tag.
fn namespace(id: &str) -> Option<String> {
    let (tag, _) = id.split_once('.')?;
    (tag.len() == TAG_LEN && tag.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("{NAMESPACE}/{tag}"))
}

fn unavailable() -> RpcError {
    RpcError::new(
        -32603,
        "tasks: the kv store is not available (see the server's startup problems)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_shape_hides_owner_and_process() {
        let record = Record {
            task_id: "t".into(),
            status: Status::Working,
            status_message: None,
            created_at: now(),
            last_updated_at: now(),
            ttl_ms: TTL_MS,
            poll_interval_ms: POLL_INTERVAL_MS,
            result: None,
            error: None,
            input_requests: None,
            owner: "o".into(),
            boot: "b".into(),
        };
        let wire = record.wire();
        assert_eq!(wire["taskId"], "t");
        assert_eq!(wire["status"], "working");
        assert_eq!(wire["ttlMs"], TTL_MS);
        assert_eq!(wire["pollIntervalMs"], POLL_INTERVAL_MS);
        for hidden in ["owner", "boot", "result", "error", "statusMessage"] {
            assert!(wire.get(hidden).is_none(), "{hidden}");
        }
    }

    #[test]
    fn a_task_id_names_its_owners_namespace() {
        let id = "0123456789abcdef.6f1c0a9e-1111-4222-8333-944445555666";
        assert_eq!(
            namespace(id).as_deref(),
            Some("hangar/tasks/0123456789abcdef")
        );
        for foreign in ["6f1c0a9e-1111", "short.x", "0123456789abcdeg.x", ""] {
            assert_eq!(namespace(foreign), None, "{foreign}");
        }
    }
}
