//! What an upstream sends during a call besides its answer: progress and
//! log notifications (relayed to the call's events), a tools or resources
//! `list_changed` (a refresh), and its own requests (questions for the call's client, `ping`).

use std::time::Instant;

use serde_json::{Value, json};

use super::Upstream;
use super::client::{Client, Handshake};
use hangar_core::call::{EventSink, LogLevel, QuestionError, QuestionKind};

impl Upstream {
    /// Relays one notification the upstream sent during a call, and answers
    /// its requests: elicitation and sampling are put to the call's own
    /// client (when it can be asked), `ping` is answered, the rest refused.
    pub(super) fn relay(&self, note: &Value, sink: &EventSink, client: &Client, hs: &Handshake) {
        if let Some(id) = note.get("id").filter(|id| !id.is_null()) {
            let kind = match note.get("method").and_then(Value::as_str) {
                Some("elicitation/create") => Some(QuestionKind::Elicit),
                Some("sampling/createMessage") => Some(QuestionKind::Sample),
                Some("roots/list") => Some(QuestionKind::Roots),
                _ => None,
            };
            let ping = note.get("method").and_then(Value::as_str) == Some("ping");
            let params = note.get("params").cloned().unwrap_or(json!({}));
            let until = Instant::now() + self.config.timeout;
            let (client, hs, id, sink) = (client.clone(), hs.clone(), id.clone(), sink.clone());
            tokio::spawn(async move {
                let answer = match kind {
                    // The question goes to this call's client; its answer comes back.
                    Some(kind) => sink
                        .ask(kind, None, params, until)
                        .await
                        .map_err(|e| match e {
                            QuestionError::Unsupported(m) => {
                                json!({ "code": -32601, "message": m })
                            }
                            QuestionError::Failed(m) => json!({ "code": -32603, "message": m }),
                            QuestionError::Timeout => {
                                json!({ "code": -32001, "message": "timed out" })
                            }
                        }),
                    None if ping => Ok(json!({})),
                    None => Err(json!({ "code": -32601, "message": "Method not found" })),
                };
                client.respond(&hs, id, answer).await
            });
            return;
        }
        let params = note.get("params").cloned().unwrap_or(Value::Null);
        match note.get("method").and_then(Value::as_str) {
            Some("notifications/progress") => {
                let Some(progress) = params.get("progress").and_then(Value::as_f64) else {
                    return;
                };
                let total = params.get("total").and_then(Value::as_f64);
                let message = params
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                sink.progress(progress, total, message);
            }
            Some("notifications/message") => {
                let level = params
                    .get("level")
                    .and_then(|l| serde_json::from_value::<LogLevel>(l.clone()).ok())
                    .unwrap_or(LogLevel::Info);
                let logger = params.get("logger").and_then(Value::as_str);
                let logger =
                    logger.map_or_else(|| self.name.clone(), |l| format!("{}/{l}", self.name));
                let message = match params.get("data") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                sink.log(level, &logger, &message);
            }
            // Its lists changed, or a watched resource was updated.
            _ => {
                self.heard.note(note);
            }
        }
    }
}
