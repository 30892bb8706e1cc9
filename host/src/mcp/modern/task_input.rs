//! Questions a task's guest puts to the client. The guest's call keeps
//! running in this process and waits in its `client.elicit` (or `sample`,
//! `list-roots`) as under 2025-11-25; the question is kept here, the task's
//! record turns `input_required` with the question under `inputRequests`
//! (keyed by the guest's name for it, or `elicitation-1`, …), and
//! `tasks/update` answers it: the guest resumes, and the task is `working`
//! again once no question waits. A question waits at most until shortly
//! before the call's deadline (then the guest gets `timeout`), so a tool
//! that asks inside a task wants a long `deadline`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::super::jsonrpc::RpcError;
use super::tasks::{Status, Tasks};
use crate::pipeline::{Ask, AskError, CallEvent, ResourceChanges};

type Answer = oneshot::Sender<Result<Value, AskError>>;

/// One task's waiting questions: key → (`{method, params}`, where the answer goes).
#[derive(Default)]
struct Questions {
    asked: usize,
    waiting: BTreeMap<String, (Value, Answer)>,
}

impl Questions {
    fn requests(&self) -> Value {
        let map: Map<String, Value> = (self.waiting.iter())
            .map(|(k, (request, _))| (k.clone(), request.clone()))
            .collect();
        Value::Object(map)
    }
}

/// The waiting questions of every task running here.
#[derive(Default)]
pub struct Waiting(Mutex<HashMap<String, Questions>>);

impl Waiting {
    /// Drops a task's questions (its guest's asks fail: the task ended).
    pub fn forget(&self, task: &str) {
        self.0.lock().unwrap().remove(task);
    }

    /// Keeps `ask`; the `inputRequests` to show now.
    fn keep(&self, task: &str, ask: Ask) -> Value {
        let mut all = self.0.lock().unwrap();
        let q = all.entry(task.to_string()).or_default();
        q.asked += 1;
        let key =
            (ask.key.clone()).unwrap_or_else(|| format!("{}-{}", ask.kind.capability(), q.asked));
        let request = json!({ "method": ask.kind.method(), "params": ask.params });
        if let Some((_, earlier)) = q.waiting.insert(key.clone(), (request, ask.answer)) {
            let _ = earlier.send(Err(AskError::Failed(format!(
                "question key {key:?} was asked again before it was answered"
            ))));
        }
        q.requests()
    }

    /// Delivers the answers for waiting keys (others are ignored); the
    /// `inputRequests` still waiting.
    fn deliver(&self, task: &str, answers: &Map<String, Value>) -> Result<Value, RpcError> {
        let mut all = self.0.lock().unwrap();
        let Some(q) = all.get_mut(task) else {
            return Ok(json!({}));
        };
        for (key, answer) in answers {
            if !q.waiting.contains_key(key) {
                continue;
            }
            if !answer.is_object() {
                return Err(RpcError::invalid_params(format!(
                    "inputResponses.{key} must be an object"
                )));
            }
            let (_, tx) = q.waiting.remove(key).expect("checked above");
            let _ = tx.send(Ok(answer.clone()));
        }
        Ok(q.requests())
    }
}

/// Reads the questions of task `id`'s call until the call ends, parking
/// the task on each.
pub(super) async fn park_questions(
    tasks: Arc<Tasks>,
    id: String,
    mut events: mpsc::Receiver<CallEvent>,
    changes: ResourceChanges,
) {
    while let Some(event) = events.recv().await {
        let CallEvent::Ask(ask) = event else { continue };
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
