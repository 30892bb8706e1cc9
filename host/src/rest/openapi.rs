//! The OpenAPI 3.1 document of the REST surface, generated per caller from
//! the tools it may see: each tool's call endpoint takes its `inputSchema`
//! as the request body;
//! the resource and prompt routes are the same for every server.

use serde_json::{Map, Value, json};

use crate::catalog::ToolDef;

fn call_tool_result() -> Value {
    json!({
        "type": "object",
        "required": ["content", "isError"],
        "properties": {
            "content": { "type": "array", "items": { "$ref": "#/components/schemas/Content" } },
            "structuredContent": {},
            "isError": { "type": "boolean" },
            "_meta": { "type": "object", "properties": { "_trace_id": { "type": "string" } } }
        }
    })
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } }
    })
}

fn result_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/CallToolResult" } } }
    })
}

fn json_response(description: &str, schema: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
    })
}

/// A failure past the checks: 500, or 503 with `Retry-After` when busy.
fn failure_responses() -> [(&'static str, Value); 2] {
    [
        (
            "500",
            json_response("The component failed or hit a limit", "TracedError"),
        ),
        (
            "503",
            json!({
                "description": "Busy: no concurrency permit or instance slot came free in time",
                "headers": { "Retry-After": { "schema": { "type": "integer" }, "description": "Seconds to wait" } },
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/TracedError" } } }
            }),
        ),
    ]
}

/// `GET /resources`, `GET /resources/read`, `GET /prompts`, `POST /prompts/{name}/get`.
fn offer_paths(paths: &mut Map<String, Value>) {
    paths.insert(
        "/resources".into(),
        json!({ "get": {
            "operationId": "listResources",
            "summary": "List the resources and resource templates",
            "responses": { "200": json_response("What the caller may see", "ResourceListing") }
        } }),
    );
    let mut read = json!({
        "operationId": "readResource",
        "summary": "Read a resource",
        "parameters": [{
            "name": "uri", "in": "query", "required": true,
            "description": "A listed resource's URI, or one matching a resource template",
            "schema": { "type": "string", "minLength": 1 }
        }],
        "responses": {
            "200": json_response("The resource's contents", "ReadResourceResult"),
            "400": error_response("The uri parameter is missing"),
            "401": error_response("The auth stage refused the read"),
            "404": error_response("No such resource (or one hidden from the caller)")
        }
    });
    let mut get_prompt = json!({
        "operationId": "getPrompt",
        "summary": "Render a prompt",
        "parameters": [{ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }],
        "requestBody": { "required": false, "content": { "application/json": { "schema": {
            "type": "object", "additionalProperties": { "type": "string" },
            "description": "The prompt's arguments by name"
        } } } },
        "responses": {
            "200": json_response("The rendered messages", "GetPromptResult"),
            "400": error_response("The body is not an object of strings, or a required argument is missing"),
            "401": error_response("The auth stage refused the prompt"),
            "404": error_response("No such prompt (or one hidden from the caller)")
        }
    });
    for (status, response) in failure_responses() {
        read["responses"][status] = response.clone();
        get_prompt["responses"][status] = response;
    }
    paths.insert("/resources/read".into(), json!({ "get": read }));
    paths.insert(
        "/prompts".into(),
        json!({ "get": {
            "operationId": "listPrompts",
            "summary": "List the prompts",
            "responses": { "200": json_response("What the caller may see", "PromptListing") }
        } }),
    );
    paths.insert("/prompts/{name}/get".into(), json!({ "post": get_prompt }));
}

/// Adds the keys of the object `more` to the object `into`.
fn merge(into: &mut Value, more: Value) {
    if let (Some(into), Value::Object(more)) = (into.as_object_mut(), more) {
        into.extend(more);
    }
}

/// The schemas of MCP's resource and prompt shapes.
fn offer_schemas() -> Value {
    // An object with a name, an optional title and description, and `more`.
    let described = |required: &[&str], more: Value| {
        let mut properties = json!({
            "name": { "type": "string" },
            "title": { "type": "string" },
            "description": { "type": "string" }
        });
        merge(&mut properties, more);
        json!({ "type": "object", "required": required, "properties": properties })
    };
    // The plugin or upstream serving a listed resource or template.
    let server = |whose: &str| {
        json!({
            "type": "object",
            "description": format!("The {whose} that serves it"),
            "required": ["name"],
            "properties": { "name": { "type": "string" } }
        })
    };
    json!({
        "Resource": described(&["uri", "name"], json!({
            "uri": { "type": "string" },
            "mimeType": { "type": "string" },
            "size": { "type": "integer" },
            "plugin": server("plugin"),
            "upstream": server("upstream server")
        })),
        "ResourceTemplate": described(&["uriTemplate", "name"], json!({
            "uriTemplate": { "type": "string" },
            "mimeType": { "type": "string" },
            "plugin": server("plugin"),
            "upstream": server("upstream server")
        })),
        "ResourceListing": {
            "type": "object",
            "required": ["resources", "resourceTemplates"],
            "properties": {
                "resources": { "type": "array", "items": { "$ref": "#/components/schemas/Resource" } },
                "resourceTemplates": { "type": "array", "items": { "$ref": "#/components/schemas/ResourceTemplate" } }
            }
        },
        "ResourceContents": {
            "type": "object",
            "required": ["uri"],
            "description": "text, or base64 blob",
            "properties": {
                "uri": { "type": "string" },
                "mimeType": { "type": "string" },
                "text": { "type": "string" },
                "blob": { "type": "string", "contentEncoding": "base64" }
            }
        },
        "ReadResourceResult": {
            "type": "object",
            "required": ["contents"],
            "properties": {
                "contents": { "type": "array", "items": { "$ref": "#/components/schemas/ResourceContents" } },
                "_meta": { "$ref": "#/components/schemas/TraceMeta" }
            }
        },
        "PromptArgument": described(&["name", "required"], json!({ "required": { "type": "boolean" } })),
        "Prompt": described(&["name", "arguments"], json!({
            "arguments": { "type": "array", "items": { "$ref": "#/components/schemas/PromptArgument" } }
        })),
        "PromptListing": {
            "type": "object",
            "required": ["prompts"],
            "properties": { "prompts": { "type": "array", "items": { "$ref": "#/components/schemas/Prompt" } } }
        },
        "PromptMessage": {
            "type": "object",
            "required": ["role", "content"],
            "properties": {
                "role": { "enum": ["user", "assistant"] },
                "content": { "$ref": "#/components/schemas/Content" }
            }
        },
        "GetPromptResult": {
            "type": "object",
            "required": ["messages"],
            "properties": {
                "description": { "type": "string" },
                "messages": { "type": "array", "items": { "$ref": "#/components/schemas/PromptMessage" } },
                "_meta": { "$ref": "#/components/schemas/TraceMeta" }
            }
        },
        "TraceMeta": { "type": "object", "properties": { "_trace_id": { "type": "string" } } },
        "TracedError": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": { "type": "string" },
                "_meta": { "$ref": "#/components/schemas/TraceMeta" }
            }
        }
    })
}

/// The document for `tools` (what one caller may see), and the resource and
/// prompt routes.
pub fn document(tools: &[&ToolDef]) -> Value {
    let mut paths = Map::new();
    paths.insert(
        "/tools".into(),
        json!({ "get": {
            "operationId": "listTools",
            "summary": "List the tools",
            "responses": { "200": { "description": "The catalog", "content": { "application/json": {
                "schema": { "type": "array", "items": { "$ref": "#/components/schemas/ToolSummary" } } } } } }
        } }),
    );
    for tool in tools {
        let name = &tool.name;
        paths.insert(
            format!("/tools/{name}"),
            json!({ "get": {
                "operationId": format!("describe:{name}"),
                "summary": format!("Describe {name}"),
                "responses": {
                    "200": { "description": "The tool with its schemas", "content": { "application/json": { "schema": { "type": "object" } } } },
                    "404": error_response("Unknown tool")
                }
            } }),
        );
        paths.insert(
            format!("/tools/{name}/call"),
            json!({ "post": {
                "operationId": format!("call:{name}"),
                "summary": tool.title.clone().unwrap_or_else(|| name.clone()),
                "description": tool.description,
                "requestBody": { "required": false, "content": { "application/json": { "schema": tool.input_schema } } },
                "responses": {
                    "200": result_response("The tool's result"),
                    "401": error_response("The auth stage refused the call"),
                    "403": error_response("Tool execution is disabled"),
                    "404": error_response("Unknown tool"),
                    "500": result_response("A tool-level error, or a failure of a later stage (isError: true)")
                }
            } }),
        );
    }
    offer_paths(&mut paths);
    let mut schemas = json!({
            "Error": { "type": "object", "required": ["error"], "properties": { "error": { "type": "string" } } },
            "ToolSummary": {
                "type": "object",
                "required": ["name", "description", "inputSchema"],
                "properties": {
                    "name": { "type": "string" },
                    "description": { "type": "string" },
                    "inputSchema": { "type": "object" },
                    "annotations": { "type": "object" },
                    "_meta": { "type": "object", "description": "The tool's _meta, e.g. an MCP App's ui.resourceUri" },
                    "plugin": {
                        "type": "object",
                        "description": "A plugin's tool: the plugin's name, and the tool's name in that plugin",
                        "required": ["name", "tool"],
                        "properties": { "name": { "type": "string" }, "tool": { "type": "string" } }
                    },
                    "upstream": {
                        "type": "object",
                        "description": "An upstream server's tool: the upstream's name, and the tool's name on that server",
                        "required": ["name", "tool"],
                        "properties": { "name": { "type": "string" }, "tool": { "type": "string" } }
                    }
                }
            },
            "Content": {
                "type": "object",
                "required": ["type"],
                "properties": {
                    "type": { "enum": ["text", "image", "audio", "resource", "resource_link"] },
                    "text": { "type": "string" },
                    "data": { "type": "string", "contentEncoding": "base64" },
                    "mimeType": { "type": "string" },
                    "resource": { "type": "object" },
                    "uri": { "type": "string" },
                    "name": { "type": "string" }
                }
            },
            "CallToolResult": call_tool_result()
    });
    merge(&mut schemas, offer_schemas());
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Hangar tools",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The tools this caller may see, and the resource and prompt routes of this Hangar server, over plain HTTP. The same are served over MCP at /mcp."
        },
        "paths": paths,
        "components": { "schemas": schemas }
    })
}
