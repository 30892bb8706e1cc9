//! An upstream's resources and resource templates: listed with its tools
//! (`resources/list`, `resources/templates/list`, every page) and read by
//! forwarding `resources/read` in the caller's upstream session. URIs are
//! kept as the upstream gives them: an MCP App's tool names its `ui://` view
//! by that URI in `_meta.ui.resourceUri`, which passes through unchanged.

use serde::Deserialize;
use serde_json::{Value, json};

use super::Upstream;
use super::client::{Reply, WireError};
use super::offers::{UpstreamOffers, prompt_def, resource_def, template_def};
use super::slot::{CATALOG_KEY, capabilities};
use hangar_core::call::{CallContext, CallError, ErrorKind, ReadResult, ResourceContents, Stage};

/// A `resources/read` answer as MCP shapes it; anything else is refused.
#[derive(Deserialize)]
struct ReadAnswer {
    contents: Vec<ResourceContents>,
    #[serde(rename = "_meta", default)]
    meta: Option<hangar_core::call::Meta>,
}

impl Upstream {
    /// Sends request `method` in the caller's upstream session and waits
    /// for its answer: notifications meanwhile are relayed to the call's
    /// events, a client's cancellation stops the wait.
    pub(super) async fn ask(
        &self,
        method: &'static str,
        params: Value,
        cx: &CallContext,
    ) -> Result<Reply, CallError> {
        let (key, bearer) = self.caller_session(cx).await?;
        let traceparent = super::traceparent(cx);
        let sink = cx.events.clone();
        let reply = self
            .with_session(&key, traceparent.as_deref(), capabilities(cx), bearer, |client, hs, id| {
                let sink = sink.clone();
                let tp = traceparent.clone();
                let params = params.clone();
                async move {
                    let mut on_note = |note: &Value| self.relay(note, &sink, &client, &hs);
                    let asked = client.request(&hs, id, method, params, tp.as_deref(), &mut on_note);
                    tokio::select! {
                        reply = asked => reply,
                        _ = cx.cancel.cancelled() => Err(WireError::Protocol("cancelled".into())),
                    }
                }
            })
            .await;
        if cx.cancel.is_cancelled() {
            return Err(CallError::cancelled(Stage::Upstream));
        }
        reply
    }

    /// Its resources and templates as listed last (none when `resources =
    /// false`, or when it offers none).
    pub fn offers(&self) -> std::sync::Arc<UpstreamOffers> {
        self.offers.read().expect("offers lock").clone()
    }

    /// Lists its resources and templates. A server that does not offer
    /// resources answers the methods with an error: it offers none.
    pub(super) async fn list_offers(&self) -> Result<UpstreamOffers, String> {
        let mut offers = UpstreamOffers::default();
        if self.config.resources {
            let resources = self.list_pages("resources/list", "resources").await?;
            let templates = self
                .list_pages("resources/templates/list", "resourceTemplates")
                .await?;
            offers.resources = resources.iter().filter_map(resource_def).collect();
            offers.templates = templates.iter().filter_map(template_def).collect();
        }
        if self.config.prompts {
            let prompts = self.list_pages("prompts/list", "prompts").await?;
            offers.prompts = prompts.iter().filter_map(prompt_def).collect();
        }
        Ok(offers)
    }

    /// Every page of one list in the catalog's own session; a JSON-RPC
    /// error answer is an empty list.
    async fn list_pages(
        &self,
        method: &'static str,
        key: &'static str,
    ) -> Result<Vec<Value>, String> {
        let listed = self
            .with_session(
                CATALOG_KEY,
                None,
                json!({}),
                None,
                |client, hs, id| async move {
                    client.list_pages(&hs, id, method, key, &mut |_| {}).await
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        Ok(listed.unwrap_or_default())
    }

    /// Reads `uri` from the upstream in the caller's upstream session: the
    /// contents and their `_meta` (and the result's) come back as it gave
    /// them. A client's cancellation stops the wait; an answer that is not
    /// a `ReadResourceResult` is an error naming the upstream.
    pub async fn read(&self, uri: &str, cx: &CallContext) -> Result<ReadResult, CallError> {
        let reply = self.ask("resources/read", json!({ "uri": uri }), cx).await;
        match reply? {
            Reply::Result(result) => {
                let answer: ReadAnswer = serde_json::from_value(result).map_err(|e| {
                    self.error(
                        ErrorKind::Failed,
                        &format!("answered no ReadResourceResult: {e}"),
                    )
                })?;
                Ok(ReadResult {
                    contents: answer.contents,
                    meta: answer.meta,
                })
            }
            Reply::Error(error) => Err(self.answered_error(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_answer_keeps_the_contents_meta() {
        let answer: ReadAnswer = serde_json::from_value(json!({
            "contents": [{ "uri": "ui://a", "mimeType": "text/html;profile=mcp-app", "text": "<p>",
                           "_meta": { "ui": { "prefersBorder": false } } }],
            "_meta": { "x/y": 1 }
        }))
        .unwrap();
        let contents = serde_json::to_value(&answer.contents[0]).unwrap();
        assert_eq!(contents["_meta"]["ui"]["prefersBorder"], false);
        assert_eq!(answer.meta.unwrap()["x/y"], 1);
        assert!(serde_json::from_value::<ReadAnswer>(json!({ "contents": "x" })).is_err());
    }
}
