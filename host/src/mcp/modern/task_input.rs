//! Questions a task's guest puts to the client. The guest's call keeps
//! running in this process and waits in its `client.elicit` (or `sample`,
//! `list-roots`) as under 2025-11-25; the question is kept here, the task's
//! record turns `input_required` with the question under `inputRequests`
//! (keyed by the guest's name for it, or `elicitation-1`, …), and
//! `tasks/update` answers it: the guest resumes, and the task is `working`
//! again once no question waits. A question waits at most until shortly
//! before the call's deadline (then the guest gets `timeout`), so a tool
//! that asks inside a task wants a long `deadline`.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::tasks::{Status, Tasks};
use crate::mcp::jsonrpc::RpcError;
use hangar_core::call::{CallEvent, ResourceChanges};

/// Reads the questions of task `id`'s call until the call ends, parking
/// the task on each.
pub(super) async fn park_questions(
    tasks: Arc<Tasks>,
    id: String,
    mut events: mpsc::Receiver<CallEvent>,
    changes: ResourceChanges,
) {
    while let Some(event) = events.recv().await {
        let CallEvent::Question(ask) = event else {
            continue;
        };
        let requests = tasks.waiting.keep(&id, ask);
        show(&tasks, &id, requests, &changes).await;
    }
}

/// `tasks/update`: answers the waiting questions named in `answers`.
pub(super) async fn answer(
    tasks: &Tasks,
    id: &str,
    answers: &Map<String, Value>,
    changes: &ResourceChanges,
) -> Result<(), RpcError> {
    let requests = tasks.waiting.deliver(id, answers)?;
    show(tasks, id, requests, changes).await;
    Ok(())
}

/// Records the questions still waiting: `input_required` with them, or
/// `working` when none is left. A task already ended is left as it is.
async fn show(tasks: &Tasks, id: &str, requests: Value, changes: &ResourceChanges) {
    let _writing = tasks.writing.lock().await;
    let mut record = match tasks.load(id).await {
        Ok(Some(r)) if !r.status.terminal() => r,
        _ => return,
    };
    let waiting = requests.as_object().is_some_and(|m| !m.is_empty());
    let status = if waiting {
        Status::InputRequired
    } else {
        Status::Working
    };
    record.input_requests = waiting.then_some(requests);
    record.set(status, None);
    match tasks.put(&record).await {
        Ok(()) => changes.task(id, &record.owner, record.wire()),
        Err(e) => tracing::warn!(task = id, "{}", e.message),
    }
}
