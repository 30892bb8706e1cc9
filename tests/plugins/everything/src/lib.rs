//! `everything`: the tools, resources, prompts and completions the official
//! MCP conformance suite asks for, with the names and outputs it expects.
//! Also a tour of every content type, and of asking the client
//! (elicitation, sampling) in the middle of a call.

mod jobs;
mod lists;
mod rounds;

use std::time::Duration;

use hangar_sdk::client::{self, ClientError, ElicitAction, SamplingMessage, SamplingRequest};
use hangar_sdk::{
    CallContext, CallResult, Completion, CompletionRequest, Completions, ContentBlock, LogLevel,
    PromptDefinition, PromptError, PromptMessage, PromptResult, Prompts, Reference,
    ResourceDefinition, ResourceError, ResourceItem, ResourceTemplate, Resources, Tool,
    ToolDefinition, ToolError, Value, json, log, progress,
};

/// A 1×1 red PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A WAV file: 8 kHz, 8-bit mono, 8 samples of silence.
fn wav() -> Vec<u8> {
    let samples = [0x80u8; 8];
    let mut w = Vec::with_capacity(44 + samples.len());
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    w.extend_from_slice(&8000u32.to_le_bytes()); // byte rate
    w.extend_from_slice(&1u16.to_le_bytes()); // block align
    w.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    w.extend_from_slice(b"data");
    w.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    w.extend_from_slice(&samples);
    w
}

const TOOLS: &[(&str, &str)] = &[
    ("test_simple_text", "Returns a simple text response"),
    ("test_image_content", "Returns a 1x1 PNG image"),
    ("test_audio_content", "Returns a short WAV clip"),
    (
        "test_embedded_resource",
        "Returns an embedded text resource",
    ),
    (
        "test_multiple_content_types",
        "Returns text, an image and a resource",
    ),
    ("test_error_handling", "Always fails with a tool error"),
    (
        "test_tool_with_logging",
        "Sends three log messages while it runs",
    ),
    (
        "test_tool_with_progress",
        "Reports progress 0, 50 and 100 of 100",
    ),
];

struct Everything;

/// A string-argument schema.
fn one_string(name: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": { name: { "type": "string", "description": description } },
        "required": [name],
    })
}

/// Tools that ask the client in the middle of their work.
fn asking_tools() -> Vec<ToolDefinition> {
    let none = || json!({ "type": "object", "properties": {} });
    vec![
        ToolDefinition::new(
            "test_sampling",
            "Asks the client's LLM to complete a prompt (sampling)",
            one_string("prompt", "The prompt to send to the LLM"),
        ),
        ToolDefinition::new(
            "test_elicitation",
            "Asks the user for a username and an email (elicitation)",
            one_string("message", "The message to show the user"),
        ),
        ToolDefinition::new(
            "test_elicitation_sep1034_defaults",
            "Asks the user with a form whose fields have defaults",
            none(),
        ),
        ToolDefinition::new(
            "test_elicitation_sep1330_enums",
            "Asks the user with every kind of enum field",
            none(),
        ),
        ToolDefinition::new(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": { "address": { "$anchor": "addressDef", "type": "object",
                    "properties": { "street": { "type": "string" }, "city": { "type": "string" } } } },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" },
                    "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                    "phone": { "type": "string" },
                    "email": { "type": "string" },
                },
                "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
                "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
                "then": { "required": ["phone"] },
                "else": { "required": ["email"] },
                "additionalProperties": false,
            }),
        ),
        ToolDefinition::new(
            "test_touch_resource",
            "Tells clients subscribed to a resource that it changed",
            one_string("uri", "The resource that changed"),
        ),
    ]
}

/// The string argument `name` of a call.
fn arg(arguments: &str, name: &str) -> Result<String, ToolError> {
    let args: Value = hangar_sdk::parse_args(arguments)?;
    args.get(name)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ToolError::new(format!("{name} must be a string")))
}

fn client_error(e: ClientError) -> ToolError {
    ToolError::new(match e {
        ClientError::Unsupported(m) => format!("cannot ask the client: {m}"),
        ClientError::Failed(m) => format!("the client failed: {m}"),
        ClientError::Timeout => "the client did not answer in time".to_string(),
    })
}

/// Asks the user with `schema` and reports what came back.
fn elicit(message: &str, schema: Value, prefix: &str) -> Result<CallResult, ToolError> {
    let answer = client::elicit(message, &schema.to_string()).map_err(client_error)?;
    let action = match answer.action {
        ElicitAction::Accept => "accept",
        ElicitAction::Decline => "decline",
        ElicitAction::Cancel => "cancel",
    };
    let content = answer.content.unwrap_or_else(|| "{}".into());
    Ok(CallResult::text(format!(
        "{prefix}action={action}, content={content}"
    )))
}

impl Tool for Everything {
    fn list_tools() -> Vec<ToolDefinition> {
        let mut tools: Vec<ToolDefinition> = TOOLS
            .iter()
            .map(|(name, description)| {
                ToolDefinition::new(
                    name,
                    description,
                    json!({ "type": "object", "properties": {} }),
                )
            })
            .collect();
        tools.extend(asking_tools());
        tools.extend(rounds::tools());
        tools.extend(lists::tools());
        tools.extend(jobs::tools());
        tools
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        let pause = || std::thread::sleep(Duration::from_millis(50));
        let handled = (rounds::call(&name))
            .or_else(|| lists::call(&name))
            .or_else(|| jobs::call(&name, &arguments));
        if let Some(result) = handled {
            return result;
        }
        Ok(match name.as_str() {
            "test_sampling" => {
                let prompt = arg(&arguments, "prompt")?;
                let answer = client::sample(&SamplingRequest {
                    messages: vec![SamplingMessage {
                        role: client::Role::User,
                        content: ContentBlock::text(prompt),
                    }],
                    system_prompt: None,
                    max_tokens: 100,
                    temperature: None,
                    model_hints: Vec::new(),
                })
                .map_err(client_error)?;
                let text = match answer.content {
                    ContentBlock::Text(t) => t,
                    _ => "(not text)".to_string(),
                };
                CallResult::text(format!("LLM response: {text}"))
            }
            "test_elicitation" => {
                let message = arg(&arguments, "message")?;
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "username": { "type": "string", "description": "User's response" },
                        "email": { "type": "string", "description": "User's email address" },
                    },
                    "required": ["username", "email"],
                });
                elicit(&message, schema, "User response: ")?
            }
            "test_elicitation_sep1034_defaults" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "name": { "type": "string", "default": "John Doe" },
                        "age": { "type": "integer", "default": 30 },
                        "score": { "type": "number", "default": 95.5 },
                        "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
                        "verified": { "type": "boolean", "default": true },
                    },
                });
                elicit(
                    "Please review your details",
                    schema,
                    "Elicitation completed: ",
                )?
            }
            "test_elicitation_sep1330_enums" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                        "titledSingle": { "type": "string", "oneOf": [
                            { "const": "value1", "title": "First Option" },
                            { "const": "value2", "title": "Second Option" },
                            { "const": "value3", "title": "Third Option" },
                        ] },
                        "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"],
                                        "enumNames": ["Option One", "Option Two", "Option Three"] },
                        "untitledMulti": { "type": "array", "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
                        "titledMulti": { "type": "array", "items": { "anyOf": [
                            { "const": "value1", "title": "First Choice" },
                            { "const": "value2", "title": "Second Choice" },
                            { "const": "value3", "title": "Third Choice" },
                        ] } },
                    },
                });
                elicit("Pick your options", schema, "Elicitation completed: ")?
            }
            "json_schema_2020_12_tool" => CallResult::text(format!("received {arguments}")),
            "test_touch_resource" => {
                let uri = arg(&arguments, "uri")?;
                client::resource_updated(&uri);
                CallResult::text(format!("announced an update of {uri}"))
            }
            "test_simple_text" => CallResult::text("This is a simple text response for testing."),
            "test_image_content" => CallResult::new(vec![ContentBlock::image(PNG, "image/png")]),
            "test_audio_content" => CallResult::new(vec![ContentBlock::audio(&wav(), "audio/wav")]),
            "test_embedded_resource" => CallResult::new(vec![ContentBlock::resource_text(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            )]),
            "test_multiple_content_types" => CallResult::new(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(PNG, "image/png"),
                ContentBlock::resource_text(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                ),
            ]),
            "test_error_handling" => {
                return Err(ToolError::new(
                    "This tool intentionally returns an error for testing",
                ));
            }
            "test_tool_with_logging" => {
                log(LogLevel::Info, "Tool execution started");
                pause();
                log(LogLevel::Info, "Tool processing data");
                pause();
                log(LogLevel::Info, "Tool execution completed");
                CallResult::text("Logging test completed")
            }
            "test_tool_with_progress" => {
                progress(0.0, Some(100.0), None);
                pause();
                progress(50.0, Some(100.0), None);
                pause();
                progress(100.0, Some(100.0), None);
                CallResult::text("Progress test completed")
            }
            other => return Err(ToolError::new(format!("unknown tool {other}"))),
        })
    }
}

const STATIC_TEXT: &str = "This is the content of the static text resource.";

impl Resources for Everything {
    fn list_resources() -> Vec<ResourceDefinition> {
        vec![
            ResourceDefinition::new("test://static-text", "static-text")
                .description("A static text resource")
                .mime_type("text/plain"),
            ResourceDefinition::new("test://static-binary", "static-binary")
                .description("A static binary resource (a 1x1 PNG)")
                .mime_type("image/png"),
            ResourceDefinition::new("test://watched-resource", "watched-resource")
                .description("A resource to subscribe to; test_touch_resource announces updates")
                .mime_type("text/plain"),
        ]
    }

    fn list_templates() -> Vec<ResourceTemplate> {
        vec![
            ResourceTemplate::new("test://template/{id}/data", "template-data")
                .description("Data for any id")
                .mime_type("application/json"),
        ]
    }

    fn read(_cx: CallContext, uri: String) -> Result<Vec<ResourceItem>, ResourceError> {
        let item = match uri.as_str() {
            "test://static-text" => ResourceItem::text(&uri, "text/plain", STATIC_TEXT),
            "test://static-binary" => ResourceItem::blob(&uri, "image/png", PNG),
            "test://watched-resource" => {
                ResourceItem::text(&uri, "text/plain", "Watched resource content.")
            }
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
            {
                Some(id) if !id.is_empty() && !id.contains('/') => {
                    let body = json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") });
                    ResourceItem::text(&uri, "application/json", &body.to_string())
                }
                _ => return Err(ResourceError::NotFound(format!("no resource {uri}"))),
            },
        };
        Ok(vec![item])
    }
}

impl Prompts for Everything {
    fn list_prompts() -> Vec<PromptDefinition> {
        let mut prompts = vec![
            PromptDefinition::new("test_simple_prompt", "A prompt without arguments"),
            PromptDefinition::new("test_prompt_with_arguments", "A prompt with two arguments")
                .argument("arg1", "First test argument", true)
                .argument("arg2", "Second test argument", true),
            PromptDefinition::new(
                "test_prompt_with_embedded_resource",
                "A prompt that embeds a resource",
            )
            .argument("resourceUri", "URI of the resource to embed", true),
            PromptDefinition::new("test_prompt_with_image", "A prompt with an image"),
            PromptDefinition::new(
                "test_input_required_result_prompt",
                "Asks the user what context the prompt should use",
            ),
        ];
        prompts.extend(lists::prompts());
        prompts
    }

    fn get_prompt(
        _cx: CallContext,
        name: String,
        arguments: Vec<(String, String)>,
    ) -> Result<PromptResult, PromptError> {
        let get = |key: &str| {
            arguments
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| PromptError::InvalidArguments(format!("missing argument {key}")))
        };
        let user = |text: String| PromptMessage::user(ContentBlock::text(text));
        let messages = match name.as_str() {
            "test_simple_prompt" => vec![user("This is a simple prompt for testing.".into())],
            "test_prompt_with_arguments" => vec![user(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                get("arg1")?,
                get("arg2")?
            ))],
            "test_prompt_with_embedded_resource" => vec![
                PromptMessage::user(ContentBlock::resource_text(
                    &get("resourceUri")?,
                    "text/plain",
                    "Embedded resource content for testing.",
                )),
                user("Please process the embedded resource above.".into()),
            ],
            "test_prompt_with_image" => vec![
                PromptMessage::user(ContentBlock::image(PNG, "image/png")),
                user("Please analyze the image above.".into()),
            ],
            "test_input_required_result_prompt" => {
                let context = rounds::prompt_context()
                    .map_err(|e| PromptError::Failed(client_error(e).message))?;
                vec![user(format!("Use this context: {context}"))]
            }
            "test_changed_prompt" => vec![user("This prompt comes and goes.".into())],
            other => return Err(PromptError::InvalidArguments(format!("no prompt {other}"))),
        };
        Ok(PromptResult::new(messages))
    }
}

/// Words suggested for any prompt argument or template variable.
const SUGGESTIONS: &[&str] = &["paris", "park", "party", "test", "testing", "tested"];

impl Completion for Everything {
    fn complete(request: CompletionRequest) -> Completions {
        let known = match &request.reference {
            Reference::Prompt(name) => name.starts_with("test_prompt"),
            Reference::ResourceTemplate(t) => t == "test://template/{id}/data",
        };
        let values: Vec<String> = SUGGESTIONS
            .iter()
            .filter(|s| known && s.starts_with(&request.value))
            .map(|s| s.to_string())
            .collect();
        Completions {
            total: Some(values.len() as u32),
            values,
            has_more: false,
        }
    }
}

hangar_sdk::export_server!(Everything);
