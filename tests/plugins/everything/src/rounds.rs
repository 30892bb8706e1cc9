//! Tools the conformance suite's 2026-07-28 scenarios call: questions to
//! the client that the host turns into input-required rounds (or, for a
//! 2025 client, into requests on the call's stream). Each asks every
//! question it needs before it looks at any answer, so one round carries
//! them all, and stops at the first question still unanswered.

use hangar_sdk::client::{self, ClientError, ElicitAction, SamplingMessage, SamplingRequest};
use hangar_sdk::{CallResult, ContentBlock, ToolDefinition, ToolError, Value, json};

use crate::client_error;

fn none() -> Value {
    json!({ "type": "object", "properties": {} })
}

pub fn tools() -> Vec<ToolDefinition> {
    [
        (
            "test_input_required_result_elicitation",
            "Asks the user's name, then greets them",
        ),
        (
            "test_input_required_result_sampling",
            "Asks the client's LLM for the capital of France",
        ),
        (
            "test_input_required_result_request_state",
            "Asks for a confirmation; says state-ok once it has it",
        ),
        (
            "test_input_required_result_multi_round",
            "Asks a name, then a colour: two rounds",
        ),
        (
            "test_input_required_result_list_roots",
            "Asks the client for its roots, then lists them",
        ),
        (
            "test_input_required_result_multiple_inputs",
            "Asks a name, a greeting and the roots in one round",
        ),
        (
            "test_input_required_result_capabilities",
            "Asks only what the client can answer",
        ),
        (
            "test_input_required_result_tampered_state",
            "Asks once; a forged state is refused by the host",
        ),
        (
            "test_missing_capability",
            "Needs sampling: fails when the client cannot sample",
        ),
        (
            "test_streaming_elicitation",
            "Asks the user for a name while it runs",
        ),
        (
            "test_logging_tool",
            "Sends three log messages while it runs",
        ),
    ]
    .into_iter()
    .map(|(name, description)| ToolDefinition::new(name, description, none()))
    .collect()
}

/// One form question: `field` as a required property of `kind`.
fn ask(message: &str, field: &str, kind: &str) -> Result<Value, ClientError> {
    ask_keyed(None, message, field, kind)
}

/// [`ask`], named `key` when given (the key a 2026-07-28 client answers under).
fn ask_keyed(
    key: Option<&str>,
    message: &str,
    field: &str,
    kind: &str,
) -> Result<Value, ClientError> {
    let schema = json!({
        "type": "object",
        "properties": { field: { "type": kind } },
        "required": [field],
    });
    let answer = match key {
        Some(key) => client::elicit_as(key, message, &schema.to_string())?,
        None => client::elicit(message, &schema.to_string())?,
    };
    match answer.action {
        ElicitAction::Accept => Ok(answer
            .content
            .and_then(|c| serde_json_value(&c))
            .and_then(|c| c.get(field).cloned())
            .unwrap_or(Value::Null)),
        ElicitAction::Decline => Ok(json!("(declined)")),
        ElicitAction::Cancel => Ok(json!("(cancelled)")),
    }
}

fn serde_json_value(text: &str) -> Option<Value> {
    hangar_sdk::parse_args::<Value>(text).ok()
}

fn sample(prompt: &str, max_tokens: u32) -> Result<String, ClientError> {
    sample_keyed(None, prompt, max_tokens)
}

fn sample_keyed(key: Option<&str>, prompt: &str, max_tokens: u32) -> Result<String, ClientError> {
    let request = SamplingRequest {
        messages: vec![SamplingMessage {
            role: client::Role::User,
            content: ContentBlock::text(prompt),
        }],
        system_prompt: None,
        max_tokens,
        temperature: None,
        model_hints: Vec::new(),
    };
    let answer = match key {
        Some(key) => client::sample_as(key, &request)?,
        None => client::sample(&request)?,
    };
    Ok(match answer.content {
        ContentBlock::Text(t) => t,
        _ => "(not text)".into(),
    })
}

/// The client's roots, as `name (uri)` joined by commas.
fn roots(key: Option<&str>) -> Result<String, ClientError> {
    let roots = match key {
        Some(key) => client::list_roots_as(key)?,
        None => client::list_roots()?,
    };
    let shown: Vec<String> = roots
        .iter()
        .map(|r| match &r.name {
            Some(name) => format!("{name} ({})", r.uri),
            None => r.uri.clone(),
        })
        .collect();
    Ok(shown.join(", "))
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// The context `test_input_required_result_prompt` asks the user for.
pub fn prompt_context() -> Result<String, ClientError> {
    ask("What context should the prompt use?", "context", "string").map(|v| text(&v))
}

/// The call of one of [`tools`]; `None` for any other name.
pub fn call(name: &str) -> Option<Result<CallResult, ToolError>> {
    let result = match name {
        "test_input_required_result_elicitation" => {
            ask_keyed(Some("user_name"), "What is your name?", "name", "string")
                .map(|name| CallResult::text(format!("Hello, {}!", text(&name))))
                .map_err(client_error)
        }
        "test_input_required_result_list_roots" => roots(Some("client_roots"))
            .map(|roots| CallResult::text(format!("Client roots: {roots}")))
            .map_err(client_error),
        "test_input_required_result_tampered_state" => ask("What is your name?", "name", "string")
            .map(|name| CallResult::text(format!("Hello, {}!", text(&name))))
            .map_err(client_error),
        "test_input_required_result_sampling" => sample("What is the capital of France?", 100)
            .map(|answer| CallResult::text(format!("LLM response: {answer}")))
            .map_err(client_error),
        "test_input_required_result_request_state" => ask("Please confirm", "ok", "boolean")
            .map(|ok| CallResult::text(format!("state-ok: confirmed={}", text(&ok))))
            .map_err(client_error),
        "test_input_required_result_multi_round" => (|| -> Result<CallResult, ClientError> {
            let name = ask("Step 1: What is your name?", "name", "string")?;
            let color = ask("Step 2: What is your favorite color?", "color", "string")?;
            Ok(CallResult::text(format!(
                "{} likes {}",
                text(&name),
                text(&color)
            )))
        })()
        .map_err(client_error),
        "test_input_required_result_multiple_inputs" => {
            let name = ask_keyed(Some("user_name"), "What is your name?", "name", "string");
            let greeting = sample_keyed(Some("greeting"), "Generate a greeting", 50);
            let roots = roots(Some("client_roots"));
            match (name, greeting, roots) {
                (Ok(name), Ok(greeting), Ok(roots)) => Ok(CallResult::text(format!(
                    "{greeting}, {} (roots: {roots})",
                    text(&name)
                ))),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(client_error(e)),
            }
        }
        "test_input_required_result_capabilities" => {
            // What the client cannot answer is skipped; what it can, awaited.
            let name = ask("What is your name?", "name", "string");
            let capital = sample("What is the capital of France?", 100);
            let mut got = Vec::new();
            let mut waiting = None;
            for (what, answer) in [("name", name.map(|v| text(&v))), ("capital", capital)] {
                match answer {
                    Ok(v) => got.push(format!("{what}={v}")),
                    Err(ClientError::Unsupported(_)) => got.push(format!("{what}=(not asked)")),
                    Err(e) => waiting = Some(e),
                }
            }
            match waiting {
                Some(e) => Err(client_error(e)),
                None => Ok(CallResult::text(got.join(", "))),
            }
        }
        "test_missing_capability" => sample("Say hello", 20)
            .map(|answer| CallResult::text(format!("LLM response: {answer}")))
            .map_err(client_error),
        "test_streaming_elicitation" => ask("Who is streaming?", "name", "string")
            .map(|name| CallResult::text(format!("Streaming for {}", text(&name))))
            .map_err(client_error),
        "test_logging_tool" => {
            for message in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ] {
                hangar_sdk::log(hangar_sdk::LogLevel::Info, message);
            }
            Ok(CallResult::text("Logging test completed"))
        }
        _ => return None,
    };
    Some(result)
}
