//! An upstream's prompts and completions: `prompts/get` and
//! `completion/complete` forwarded in the caller's upstream session, the
//! prompt named as the upstream names it (without the prefix it is listed
//! under through Hangar).

use serde_json::{Map, Value, json};

use super::Upstream;
use super::client::Reply;
use hangar_core::call::{
    CallContext, CallError, CompletionRef, Completions, ErrorKind, PromptResult,
};

impl Upstream {
    /// Its name for the prompt listed through Hangar as `name`.
    pub fn remote_prompt<'a>(&self, name: &'a str) -> &'a str {
        name.strip_prefix(self.config.prefix.as_str())
            .unwrap_or(name)
    }

    /// The prompt's name as listed through Hangar (prefixed like its tools).
    pub fn listed_prompt(&self, remote: &str) -> String {
        format!("{}{remote}", self.config.prefix)
    }

    /// Renders its prompt listed as `name` with `arguments`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        cx: &CallContext,
    ) -> Result<PromptResult, CallError> {
        let params = json!({ "name": self.remote_prompt(name), "arguments": arguments });
        match self.ask("prompts/get", params, cx).await? {
            Reply::Result(result) => serde_json::from_value(result).map_err(|e| {
                self.error(
                    ErrorKind::Failed,
                    &format!("answered no GetPromptResult: {e}"),
                )
            }),
            Reply::Error(error) => Err(self.answered_error(error)),
        }
    }

    /// Its suggestions for `argument` of a prompt (listed name) or a
    /// resource template; a server that does not complete suggests nothing.
    pub async fn complete(
        &self,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: &Map<String, Value>,
        cx: &CallContext,
    ) -> Result<Completions, CallError> {
        let reference = match reference {
            CompletionRef::Prompt(name) => {
                json!({ "type": "ref/prompt", "name": self.remote_prompt(name) })
            }
            CompletionRef::ResourceTemplate(uri) => {
                json!({ "type": "ref/resource", "uri": uri })
            }
        };
        let mut params = json!({
            "ref": reference,
            "argument": { "name": argument, "value": value },
        });
        if !context.is_empty() {
            params["context"] = json!({ "arguments": context });
        }
        match self.ask("completion/complete", params, cx).await? {
            Reply::Result(result) => Ok(completions(&result)),
            // Method not found: it does not complete.
            Reply::Error(error) if error.get("code").and_then(Value::as_i64) == Some(-32601) => {
                Ok(Completions::default())
            }
            Reply::Error(error) => Err(self.answered_error(error)),
        }
    }
}

/// The `completion` of a `CompleteResult`, capped; anything else is none.
fn completions(result: &Value) -> Completions {
    let completion = &result["completion"];
    let values = (completion["values"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    Completions {
        values,
        total: completion["total"]
            .as_u64()
            .map(|t| t.min(u32::MAX as u64) as u32),
        has_more: completion["hasMore"].as_bool().unwrap_or(false),
    }
    .capped()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_are_read_and_capped() {
        let many: Vec<String> = (0..150).map(|i| i.to_string()).collect();
        let c = completions(&json!({ "completion": { "values": many, "hasMore": false } }));
        assert_eq!(c.values.len(), 100);
        assert!(c.has_more);
        let none = completions(&json!({ "nothing": true }));
        assert!(none.values.is_empty() && !none.has_more);
    }
}
