//! The questions waiting in running tasks, keyed by task: what a task's
//! record holds a handle to, below the code that parks and answers them
//! (`task_input`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use crate::mcp::jsonrpc::RpcError;
use hangar_core::call::{Question, QuestionError};

type Answer = oneshot::Sender<Result<Value, QuestionError>>;

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
    pub(super) fn keep(&self, task: &str, ask: Question) -> Value {
        let mut all = self.0.lock().unwrap();
        let q = all.entry(task.to_string()).or_default();
        q.asked += 1;
        let key =
            (ask.key.clone()).unwrap_or_else(|| format!("{}-{}", ask.kind.capability(), q.asked));
        let request = json!({ "method": ask.kind.method(), "params": ask.params });
        if let Some((_, earlier)) = q.waiting.insert(key.clone(), (request, ask.answer)) {
            let _ = earlier.send(Err(QuestionError::Failed(format!(
                "question key {key:?} was asked again before it was answered"
            ))));
        }
        q.requests()
    }

    /// Delivers the answers for waiting keys (others are ignored); the
    /// `inputRequests` still waiting.
    pub(super) fn deliver(
        &self,
        task: &str,
        answers: &Map<String, Value>,
    ) -> Result<Value, RpcError> {
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
