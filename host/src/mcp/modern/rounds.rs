//! Input-required rounds (MRTR): how a guest's questions to the client
//! (elicitation, sampling, roots) work without server-to-client requests.
//!
//! The guest runs again from the start on every round. A question is keyed
//! by the name the guest gave it (`client.elicit-as("user_name", …)`), or
//! else numbered in the order the guest asks (`elicitation-1`, `sampling-2`,
//! `roots-3`, …).
//! A question already answered — in this request's `inputResponses`, or in
//! an earlier round's sealed `requestState` — gets its answer at once (an
//! answer under a key the state recorded for a different question is not
//! used: that question is asked again). A
//! question with no answer yet gets an error back (`failed`, "input
//! required …"), is kept, and the guest may ask more; when the guest ends,
//! whatever it returned is dropped and the client gets an
//! `InputRequiredResult` with every question kept, plus a `requestState`
//! holding the answers so far. A guest should therefore return as soon as
//! a question fails, and do nothing it cannot repeat before its questions
//! are answered.
//!
//! A question needing a capability the client did not declare is refused
//! to the guest (`unsupported`); if the call then fails, the client gets
//! `MissingRequiredClientCapability` (-32021) naming it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::codes::MISSING_CAPABILITY;
use super::meta::RequestMeta;
use super::result::server_info;
use super::state::{Answered, RoundState, StateKey, digest};
use crate::mcp::jsonrpc::RpcError;
use hangar_core::call::{Question, QuestionError, QuestionKind};

/// Questions one run may leave unanswered before it is stopped: a guest
/// that keeps asking after its questions fail is not waiting for answers.
pub const MAX_PENDING: usize = 16;

/// One request's rounds: the answers it brought and the questions its run
/// asked that have none yet.
pub struct Rounds {
    /// Digest of the request (method, name, arguments, credentials).
    bind: String,
    elicitation: bool,
    sampling: bool,
    roots: bool,
    /// Answers usable in this run, by question key.
    known: BTreeMap<String, Answered>,
    /// Questions sent on the last round (from the state): key → digest.
    asked_before: BTreeMap<String, String>,
    /// This request's `inputResponses`.
    responses: Map<String, Value>,
    /// How many questions the run has asked.
    count: usize,
    /// The questions of this run by key (digests), answered or not.
    asked_now: BTreeMap<String, String>,
    /// Questions without an answer: key → `{method, params}`, and their digests.
    pending: Map<String, Value>,
    pending_digests: BTreeMap<String, String>,
    /// Capabilities the guest needed and the client did not declare.
    missing: BTreeSet<&'static str>,
}

impl Rounds {
    /// Reads `inputResponses` and `requestState`; a state that fails its
    /// checks, or responses that are not an object, are invalid params.
    pub fn begin(
        key: &StateKey,
        meta: &RequestMeta,
        params: &Map<String, Value>,
        bind: String,
    ) -> Result<Rounds, RpcError> {
        let responses = match params.get("inputResponses") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(r)) => r.clone(),
            Some(_) => return Err(RpcError::invalid_params("inputResponses must be an object")),
        };
        let state = match params.get("requestState") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                RoundState::open(s, key, &bind)
                    .map_err(|why| RpcError::invalid_params(why.to_string()))?,
            ),
            Some(_) => return Err(RpcError::invalid_params("requestState must be a string")),
        };
        let (asked_before, known) = state.map(|s| (s.asked, s.known)).unwrap_or_default();
        Ok(Rounds {
            bind,
            elicitation: meta.declares("elicitation"),
            sampling: meta.declares("sampling"),
            roots: meta.declares("roots"),
            known,
            asked_before,
            responses,
            count: 0,
            asked_now: BTreeMap::new(),
            pending: Map::new(),
            pending_digests: BTreeMap::new(),
            missing: BTreeSet::new(),
        })
    }

    /// Answers a question of the running guest, or keeps it for the client.
    /// False when the run has left too many questions unanswered and must stop.
    pub fn ask(&mut self, ask: Question) -> bool {
        self.count += 1;
        let cap = ask.kind.capability();
        let declared = match ask.kind {
            QuestionKind::Elicit => self.elicitation,
            // Not asked through rounds (the call's Askable says so).
            QuestionKind::ElicitUrl => false,
            QuestionKind::Sample => self.sampling,
            QuestionKind::Roots => self.roots,
        };
        if !declared {
            self.missing.insert(cap);
            let _ = ask.answer.send(Err(QuestionError::Unsupported(format!(
                "the client did not declare the {cap} capability"
            ))));
            return true;
        }
        let key = match ask.key {
            Some(key) => key,
            None => format!("{cap}-{}", self.count),
        };
        let question = digest(&[&json!(ask.kind.method()), &ask.params]);
        // One key, one question per run: a guest reusing a name for another
        // question would get the first one's answer.
        match self.asked_now.get(&key) {
            Some(asked) if *asked != question => {
                let _ = ask.answer.send(Err(QuestionError::Failed(format!(
                    "question key {key:?} was used for another question in this call"
                ))));
                return true;
            }
            Some(_) => {}
            None => {
                self.asked_now.insert(key.clone(), question.clone());
            }
        }
        if let Some(known) = self.known.get(&key).filter(|k| k.q == question) {
            let _ = ask.answer.send(Ok(known.a.clone()));
            return true;
        }
        // Answered now: the client saw this very question last round, or
        // answered a question no state says it was asked differently.
        if self.asked_before.get(&key).is_none_or(|q| *q == question)
            && let Some(answer) = self.responses.get(&key).filter(|a| a.is_object())
        {
            self.known.insert(
                key,
                Answered {
                    q: question,
                    a: answer.clone(),
                },
            );
            let _ = ask.answer.send(Ok(answer.clone()));
            return true;
        }
        self.pending.insert(
            key.clone(),
            json!({ "method": ask.kind.method(), "params": ask.params }),
        );
        self.pending_digests.insert(key, question);
        let _ = ask.answer.send(Err(QuestionError::Failed(
            "input required: the client answers this question when it retries the request (protocol 2026-07-28)".into(),
        )));
        self.pending.len() < MAX_PENDING
    }

    /// The `InputRequiredResult` when the run left questions unanswered.
    pub fn input_required(&self, key: &StateKey) -> Option<Value> {
        if self.pending.is_empty() {
            return None;
        }
        let state = RoundState::new(
            self.bind.clone(),
            self.pending_digests.clone(),
            self.known.clone(),
        );
        Some(json!({
            "resultType": "input_required",
            "inputRequests": self.pending,
            "requestState": state.seal(key),
            "_meta": { "io.modelcontextprotocol/serverInfo": server_info() },
        }))
    }

    /// `MissingRequiredClientCapability` for a call that failed after the
    /// guest was refused a capability the client did not declare.
    pub fn missing_capability(&self) -> Option<RpcError> {
        if self.missing.is_empty() {
            return None;
        }
        let required: Map<String, Value> = self
            .missing
            .iter()
            .map(|c| (c.to_string(), json!({})))
            .collect();
        let names: Vec<&str> = self.missing.iter().copied().collect();
        Some(RpcError {
            code: MISSING_CAPABILITY,
            message: format!(
                "Missing required client capability: {} (declare it in _meta io.modelcontextprotocol/clientCapabilities)",
                names.join(", ")
            ),
            data: Some(json!({ "requiredCapabilities": required })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    fn meta(caps: Value) -> RequestMeta {
        RequestMeta::parse(Some(&json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
        })))
        .unwrap()
    }

    fn ask(rounds: &mut Rounds, kind: QuestionKind, text: &str) -> Result<Value, QuestionError> {
        let (tx, mut rx) = oneshot::channel();
        rounds.ask(Question {
            kind,
            key: None,
            params: json!({ "message": text }),
            answer: tx,
        });
        rx.try_recv().unwrap()
    }

    #[test]
    fn questions_are_answered_on_the_retry_and_kept_across_rounds() {
        let key = StateKey::new(Some("k"));
        let caps = meta(json!({ "elicitation": {} }));
        // Round 1: the first question has no answer.
        let mut r1 = Rounds::begin(&key, &caps, &Map::new(), "b".into()).unwrap();
        assert!(ask(&mut r1, QuestionKind::Elicit, "name?").is_err());
        let result = r1.input_required(&key).unwrap();
        assert_eq!(
            result["inputRequests"]["elicitation-1"]["method"],
            "elicitation/create"
        );
        // Round 2: answered; the second question is new.
        let params = json!({
            "inputResponses": { "elicitation-1": { "action": "accept" }, "extra": 1 },
            "requestState": result["requestState"],
        });
        let mut r2 = Rounds::begin(&key, &caps, params.as_object().unwrap(), "b".into()).unwrap();
        assert_eq!(
            ask(&mut r2, QuestionKind::Elicit, "name?").unwrap()["action"],
            "accept"
        );
        assert!(ask(&mut r2, QuestionKind::Elicit, "color?").is_err());
        let result = r2.input_required(&key).unwrap();
        assert!(result["inputRequests"].get("elicitation-2").is_some());
        // Round 3: both answers, the first from the state.
        let params = json!({
            "inputResponses": { "elicitation-2": { "action": "decline" } },
            "requestState": result["requestState"],
        });
        let mut r3 = Rounds::begin(&key, &caps, params.as_object().unwrap(), "b".into()).unwrap();
        assert!(ask(&mut r3, QuestionKind::Elicit, "name?").is_ok());
        assert_eq!(
            ask(&mut r3, QuestionKind::Elicit, "color?").unwrap()["action"],
            "decline"
        );
        assert!(r3.input_required(&key).is_none());
    }

    fn ask_as(rounds: &mut Rounds, key: &str, text: &str) -> Result<Value, QuestionError> {
        let (tx, mut rx) = oneshot::channel();
        rounds.ask(Question {
            kind: QuestionKind::Elicit,
            key: Some(key.into()),
            params: json!({ "message": text }),
            answer: tx,
        });
        rx.try_recv().unwrap()
    }

    #[test]
    fn guests_name_their_questions_and_early_answers_are_taken() {
        let key = StateKey::new(Some("k"));
        let caps = meta(json!({ "elicitation": {}, "roots": {} }));
        let mut r1 = Rounds::begin(&key, &caps, &Map::new(), "b".into()).unwrap();
        assert!(ask_as(&mut r1, "user_name", "name?").is_err());
        // The same key for another question in one run is refused.
        assert!(
            matches!(ask_as(&mut r1, "user_name", "age?"), Err(QuestionError::Failed(m)) if m.contains("another question"))
        );
        assert!(ask(&mut r1, QuestionKind::Roots, "").is_err());
        let result = r1.input_required(&key).unwrap();
        let requests = result["inputRequests"].as_object().unwrap();
        assert_eq!(
            requests.keys().collect::<Vec<_>>(),
            ["roots-3", "user_name"]
        );
        assert_eq!(requests["roots-3"]["method"], "roots/list");
        // Answered without a state (the client knew the key): taken, extras ignored.
        let params = json!({ "inputResponses": {
            "user_name": { "action": "accept", "content": { "name": "A" } },
            "unknown": { "action": "accept" },
        } });
        let mut r2 = Rounds::begin(&key, &caps, params.as_object().unwrap(), "b".into()).unwrap();
        assert_eq!(
            ask_as(&mut r2, "user_name", "name?").unwrap()["content"]["name"],
            "A"
        );
        assert!(r2.input_required(&key).is_none());
        // A state that recorded another question under the key: asked again.
        let params = json!({
            "inputResponses": { "user_name": { "action": "accept" } },
            "requestState": result["requestState"],
        });
        let mut r3 = Rounds::begin(&key, &caps, params.as_object().unwrap(), "b".into()).unwrap();
        assert!(ask_as(&mut r3, "user_name", "a different question?").is_err());
    }

    #[test]
    fn a_state_for_another_request_or_a_forged_one_is_refused() {
        let key = StateKey::new(Some("k"));
        let caps = meta(json!({ "elicitation": {} }));
        let mut r1 = Rounds::begin(&key, &caps, &Map::new(), "b".into()).unwrap();
        let _ = ask(&mut r1, QuestionKind::Elicit, "name?");
        let state = r1.input_required(&key).unwrap()["requestState"].clone();
        let params = json!({ "requestState": state });
        assert!(Rounds::begin(&key, &caps, params.as_object().unwrap(), "other".into()).is_err());
        let params = json!({ "requestState": format!("x{}", state.as_str().unwrap()) });
        assert!(Rounds::begin(&key, &caps, params.as_object().unwrap(), "b".into()).is_err());
        let params = json!({ "inputResponses": [1] });
        assert!(Rounds::begin(&key, &caps, params.as_object().unwrap(), "b".into()).is_err());
    }

    #[test]
    fn an_undeclared_capability_is_refused_and_named() {
        let key = StateKey::new(Some("k"));
        let mut r = Rounds::begin(&key, &meta(json!({})), &Map::new(), "b".into()).unwrap();
        assert!(matches!(
            ask(&mut r, QuestionKind::Sample, "hi"),
            Err(QuestionError::Unsupported(_))
        ));
        assert!(r.input_required(&key).is_none());
        let e = r.missing_capability().unwrap();
        assert_eq!(e.code, MISSING_CAPABILITY);
        assert_eq!(
            e.data.unwrap()["requiredCapabilities"],
            json!({ "sampling": {} })
        );
    }
}
