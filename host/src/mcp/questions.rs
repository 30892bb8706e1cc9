//! Server-to-client requests (`elicitation/create`, `sampling/createMessage`)
//! sent on a call's SSE stream, and routing the client's answer — a POSTed
//! JSON-RPC response — back to the call that asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::jsonrpc;
use hangar_core::call::{Question, QuestionError};

type Answer = oneshot::Sender<Result<Value, QuestionError>>;

/// A question waiting for its answer.
struct Pending {
    /// The session that must answer it (`None` when the call had none).
    session: Option<String>,
    answer: Answer,
}

/// Every question the server is waiting on, by the JSON-RPC id it was sent with.
#[derive(Clone, Default)]
pub struct Questions {
    pending: Arc<Mutex<HashMap<String, Pending>>>,
}

impl Questions {
    /// Registers `ask` and returns the request to send; the answer goes to
    /// the asking call when [`Questions::answer`] gets it. The entry goes away
    /// with the returned guard (the call's stream ended).
    pub fn send(&self, ask: Question, session: Option<&str>) -> (Vec<u8>, QuestionGuard) {
        let id = format!("hangar-{}", uuid::Uuid::new_v4().simple());
        let body =
            jsonrpc::request_body(&Value::String(id.clone()), ask.kind.method(), &ask.params);
        self.pending.lock().unwrap().insert(
            id.clone(),
            Pending {
                session: session.map(str::to_string),
                answer: ask.answer,
            },
        );
        let guard = QuestionGuard {
            questions: self.clone(),
            id,
        };
        (body, guard)
    }

    /// Delivers a client's response; false when nothing waits for this id
    /// from this session.
    pub fn answer(&self, id: &Value, session: Option<&str>, outcome: Result<Value, Value>) -> bool {
        let Some(id) = id.as_str() else {
            return false;
        };
        let mut pending = self.pending.lock().unwrap();
        match pending.get(id) {
            Some(p) if p.session.is_none() || p.session.as_deref() == session => {}
            _ => return false,
        }
        let p = pending.remove(id).expect("checked above");
        let answer = outcome.map_err(|error| {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            let code = error.get("code").cloned().unwrap_or(json!(null));
            QuestionError::Failed(format!("the client answered error {code}: {message}"))
        });
        let _ = p.answer.send(answer);
        true
    }

    fn forget(&self, id: &str) {
        self.pending.lock().unwrap().remove(id);
    }
}

/// Forgets a question when the stream that carried it ends.
pub struct QuestionGuard {
    questions: Questions,
    id: String,
}

impl Drop for QuestionGuard {
    fn drop(&mut self) {
        self.questions.forget(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::call::QuestionKind;

    #[test]
    fn answers_reach_the_asker_from_its_session_only() {
        let asks = Questions::default();
        let (tx, mut rx) = oneshot::channel();
        let ask = Question {
            kind: QuestionKind::Elicit,
            key: None,
            params: json!({ "message": "hi" }),
            answer: tx,
        };
        let (body, _guard) = asks.send(ask, Some("s1"));
        let sent: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(sent["method"], "elicitation/create");
        let id = sent["id"].clone();
        assert!(!asks.answer(&id, Some("s2"), Ok(json!({}))));
        assert!(asks.answer(&id, Some("s1"), Ok(json!({ "action": "decline" }))));
        assert_eq!(rx.try_recv().unwrap().unwrap()["action"], "decline");
        assert!(!asks.answer(&id, Some("s1"), Ok(json!({}))));
    }

    #[test]
    fn a_dropped_stream_forgets_its_questions() {
        let asks = Questions::default();
        let (tx, _rx) = oneshot::channel();
        let ask = Question {
            kind: QuestionKind::Sample,
            key: None,
            params: json!({}),
            answer: tx,
        };
        let (body, guard) = asks.send(ask, None);
        let id = serde_json::from_slice::<Value>(&body).unwrap()["id"].clone();
        drop(guard);
        assert!(!asks.answer(&id, None, Ok(json!({}))));
    }
}
