//! The `hangar:plugin/client` import: a guest asks its MCP client for user
//! input (elicitation), an LLM completion (sampling) or its roots in the
//! middle of a call, and announces changed resources and lists. Questions travel on the call's
//! [`EventSink`](hangar_core::call::EventSink); this module only translates
//! between the WIT records and MCP's JSON.
//!
//! As a [`Capability`] ([`Client`]): each plugin keeps where changes are
//! announced; each call a [`ClientCall`], with the call's events (where
//! questions travel) and its deadline (when to stop waiting for answers).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use wasmtime::component::{HasSelf, Linker};

use std::sync::Arc;
use std::time::Instant;

use super::shape::{CallSetup, Capability, GuestStore, LoadSetup, PluginSetup, Problems};
use crate::bindings::tool::hangar::plugin::client::{
    self, ClientError, ElicitAction, ElicitAnswer, OfferedList, Root, SamplingAnswer,
    SamplingRequest,
};
use crate::bindings::tool::hangar::plugin::types::{ContentBlock, Media, Role};
use hangar_core::call::{
    EventSink, List, QuestionError, QuestionKind, ResourceChanges, ask_until, question_key,
};

/// The client capability (see the module doc).
pub struct Client;

impl Capability for Client {
    const IMPORTS: &'static [&'static str] = &[];
    type Load = ResourceChanges;
    type Plugin = ResourceChanges;
    type Call = ClientCall;

    fn load(setup: &LoadSetup<'_>, _: &mut Problems) -> ResourceChanges {
        setup.changes.clone()
    }

    fn configure(
        changes: &ResourceChanges,
        _: &PluginSetup<'_>,
        _: &mut Problems,
    ) -> ResourceChanges {
        changes.clone()
    }

    fn per_call(changes: &ResourceChanges, call: &CallSetup<'_>) -> anyhow::Result<ClientCall> {
        Ok(ClientCall {
            changes: changes.clone(),
            plugin: call.plugin.clone(),
            events: call.events.clone(),
            deadline: call.deadline,
        })
    }

    fn next_call(state: &mut ClientCall, call: &CallSetup<'_>) {
        state.events = call.events.clone();
        state.deadline = call.deadline;
    }

    fn link<T: GuestStore>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut ClientCall,
    ) -> anyhow::Result<()> {
        client::add_to_linker::<T, HasSelf<ClientCall>>(linker, get)
            .map_err(|e| anyhow::anyhow!("{e:?}"))
    }
}

/// One call's side of the client: where its questions go, until when.
pub struct ClientCall {
    changes: ResourceChanges,
    plugin: Arc<str>,
    events: EventSink,
    deadline: Instant,
}

impl client::Host for ClientCall {
    async fn elicit(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> Result<ElicitAnswer, ClientError> {
        self.elicit_keyed(None, message, requested_schema).await
    }

    async fn sample(&mut self, request: SamplingRequest) -> Result<SamplingAnswer, ClientError> {
        self.sample_keyed(None, request).await
    }

    async fn list_roots(&mut self) -> Result<Vec<Root>, ClientError> {
        self.roots_keyed(None).await
    }

    async fn elicit_as(
        &mut self,
        key: String,
        message: String,
        requested_schema: String,
    ) -> Result<ElicitAnswer, ClientError> {
        self.elicit_keyed(Some(key), message, requested_schema)
            .await
    }

    async fn sample_as(
        &mut self,
        key: String,
        request: SamplingRequest,
    ) -> Result<SamplingAnswer, ClientError> {
        self.sample_keyed(Some(key), request).await
    }

    async fn list_roots_as(&mut self, key: String) -> Result<Vec<Root>, ClientError> {
        self.roots_keyed(Some(key)).await
    }

    fn resource_updated(&mut self, uri: String) {
        self.changes.updated(&uri);
    }

    fn announce_list_changed(&mut self, which: OfferedList) {
        let list = match which {
            OfferedList::Tools => List::Tools,
            OfferedList::Prompts => List::Prompts,
            OfferedList::Resources => List::Resources,
        };
        tracing::debug!(plugin = %self.plugin, ?list, "guest announced a list change");
        self.changes.relist();
    }
}

impl ClientCall {
    async fn elicit_keyed(
        &mut self,
        key: Option<String>,
        message: String,
        requested_schema: String,
    ) -> Result<ElicitAnswer, ClientError> {
        let schema: Value = serde_json::from_str(&requested_schema)
            .map_err(|e| ClientError::Failed(format!("requested-schema is not JSON: {e}")))?;
        if !schema.is_object() {
            return Err(ClientError::Failed(
                "requested-schema must be a JSON object".into(),
            ));
        }
        let params = json!({ "message": message, "requestedSchema": schema });
        let answer = self.ask(QuestionKind::Elicit, key, params).await?;
        elicit_answer(&answer).map_err(ClientError::Failed)
    }

    async fn sample_keyed(
        &mut self,
        key: Option<String>,
        request: SamplingRequest,
    ) -> Result<SamplingAnswer, ClientError> {
        let params = sampling_params(request);
        let answer = self.ask(QuestionKind::Sample, key, params).await?;
        sampling_answer(&answer).map_err(ClientError::Failed)
    }

    async fn roots_keyed(&mut self, key: Option<String>) -> Result<Vec<Root>, ClientError> {
        let answer = self.ask(QuestionKind::Roots, key, json!({})).await?;
        roots_answer(&answer).map_err(ClientError::Failed)
    }

    /// Asks the call's client, waiting at most until shortly before the deadline.
    async fn ask(
        &mut self,
        kind: QuestionKind,
        key: Option<String>,
        params: Value,
    ) -> Result<Value, ClientError> {
        let error = |e| match e {
            QuestionError::Unsupported(m) => ClientError::Unsupported(m),
            QuestionError::Failed(m) => ClientError::Failed(m),
            QuestionError::Timeout => ClientError::Timeout,
        };
        if let Some(key) = &key {
            question_key(key).map_err(error)?;
        }
        let until = ask_until(self.deadline);
        self.events
            .ask(kind, key, params, until)
            .await
            .map_err(error)
    }
}

/// A `roots/list` answer: `{"roots": [{"uri", "name"?}, …]}`.
fn roots_answer(answer: &Value) -> Result<Vec<Root>, String> {
    let roots = answer
        .get("roots")
        .and_then(Value::as_array)
        .ok_or("the client's answer has no roots list")?;
    roots
        .iter()
        .map(|r| {
            let uri = r
                .get("uri")
                .and_then(Value::as_str)
                .ok_or("a root of the client's answer has no uri")?;
            Ok(Root {
                uri: uri.to_string(),
                name: r.get("name").and_then(Value::as_str).map(str::to_string),
            })
        })
        .collect()
}

fn elicit_answer(answer: &Value) -> Result<ElicitAnswer, String> {
    let action = match answer.get("action").and_then(Value::as_str) {
        Some("accept") => ElicitAction::Accept,
        Some("decline") => ElicitAction::Decline,
        Some("cancel") => ElicitAction::Cancel,
        other => return Err(format!("the client answered an unknown action {other:?}")),
    };
    let content = match answer.get("content") {
        None | Some(Value::Null) => None,
        Some(c) if c.is_object() => Some(c.to_string()),
        Some(_) => return Err("the client's content is not an object".into()),
    };
    Ok(ElicitAnswer { action, content })
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn sampling_params(r: SamplingRequest) -> Value {
    let messages: Vec<Value> = r
        .messages
        .into_iter()
        .map(|m| json!({ "role": role_name(m.role), "content": content_json(m.content) }))
        .collect();
    let mut params = json!({ "messages": messages, "maxTokens": r.max_tokens });
    if let Some(system) = r.system_prompt {
        params["systemPrompt"] = json!(system);
    }
    if let Some(t) = r.temperature {
        params["temperature"] = json!(t);
    }
    if !r.model_hints.is_empty() {
        let hints: Vec<Value> = r.model_hints.iter().map(|n| json!({ "name": n })).collect();
        params["modelPreferences"] = json!({ "hints": hints });
    }
    params
}

/// A content block as MCP JSON (sampling messages carry text, images and audio).
fn content_json(block: ContentBlock) -> Value {
    match block {
        ContentBlock::Text(text) => json!({ "type": "text", "text": text }),
        ContentBlock::Image(m) => {
            json!({ "type": "image", "data": B64.encode(&m.data), "mimeType": m.mime_type })
        }
        ContentBlock::Audio(m) => {
            json!({ "type": "audio", "data": B64.encode(&m.data), "mimeType": m.mime_type })
        }
        ContentBlock::Resource(r) => {
            json!({ "type": "text", "text": format!("<resource {}>", r.uri) })
        }
        ContentBlock::ResourceLink(l) => json!({ "type": "text", "text": l.uri }),
    }
}

fn sampling_answer(answer: &Value) -> Result<SamplingAnswer, String> {
    let role = match answer.get("role").and_then(Value::as_str) {
        Some("assistant") | None => Role::Assistant,
        Some("user") => Role::User,
        Some(other) => return Err(format!("the client answered an unknown role {other:?}")),
    };
    // A client may answer one block or (since 2025-11-25) a list; the first is taken.
    let content = match answer.get("content") {
        Some(Value::Array(blocks)) => blocks.first(),
        other => other,
    }
    .ok_or("the client's answer has no content")?;
    let media = |c: &Value| -> Result<Media, String> {
        let data = c.get("data").and_then(Value::as_str).unwrap_or_default();
        Ok(Media {
            data: B64
                .decode(data)
                .map_err(|e| format!("the client's data is not base64: {e}"))?,
            mime_type: c
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        })
    };
    let content = match content.get("type").and_then(Value::as_str) {
        Some("text") => ContentBlock::Text(
            content
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        ),
        Some("image") => ContentBlock::Image(media(content)?),
        Some("audio") => ContentBlock::Audio(media(content)?),
        other => return Err(format!("the client answered content of type {other:?}")),
    };
    Ok(SamplingAnswer {
        role,
        content,
        model: answer
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        stop_reason: answer
            .get("stopReason")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elicit_answers_are_read() {
        let a = elicit_answer(&json!({ "action": "accept", "content": { "name": "x" } })).unwrap();
        assert!(matches!(a.action, ElicitAction::Accept));
        assert_eq!(a.content.as_deref(), Some(r#"{"name":"x"}"#));
        assert!(elicit_answer(&json!({ "action": "maybe" })).is_err());
        assert!(elicit_answer(&json!({ "action": "accept", "content": [1] })).is_err());
    }

    #[test]
    fn roots_answers_are_read() {
        let roots = roots_answer(&json!({ "roots": [
            { "uri": "file:///a", "name": "A" }, { "uri": "file:///b" }
        ] }))
        .unwrap();
        assert_eq!(roots.len(), 2);
        assert_eq!(roots[0].name.as_deref(), Some("A"));
        assert_eq!(roots[1].uri, "file:///b");
        assert!(roots_answer(&json!({ "roots": [{ "name": "no uri" }] })).is_err());
        assert!(roots_answer(&json!({})).is_err());
    }

    #[test]
    fn sampling_answers_are_read() {
        let a = sampling_answer(&json!({
            "role": "assistant", "content": { "type": "text", "text": "hi" },
            "model": "m", "stopReason": "endTurn"
        }))
        .unwrap();
        assert!(matches!(a.content, ContentBlock::Text(ref t) if t == "hi"));
        assert_eq!(a.model, "m");
        assert!(sampling_answer(&json!({ "role": "assistant" })).is_err());
    }
}
