//! The OpenAPI 3.1 document of the REST surface, generated from the catalog:
//! each tool's call endpoint takes its `inputSchema` as the request body.

use serde_json::{Map, Value, json};

use crate::catalog::Catalog;

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

/// The document for the tools in `catalog`.
pub fn document(catalog: &Catalog) -> Value {
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
    for tool in catalog.tools() {
        let name = &tool.def.name;
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
                "summary": tool.def.title.clone().unwrap_or_else(|| name.clone()),
                "description": tool.def.description,
                "requestBody": { "required": false, "content": { "application/json": { "schema": tool.def.input_schema } } },
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
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Hangar tools",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Every tool of this Hangar server, callable over plain HTTP. The same tools are served over MCP at /mcp."
        },
        "paths": paths,
        "components": { "schemas": {
            "Error": { "type": "object", "required": ["error"], "properties": { "error": { "type": "string" } } },
            "ToolSummary": {
                "type": "object",
                "required": ["name", "description", "inputSchema"],
                "properties": {
                    "name": { "type": "string" },
                    "description": { "type": "string" },
                    "inputSchema": { "type": "object" },
                    "annotations": { "type": "object" }
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
        } }
    })
}
