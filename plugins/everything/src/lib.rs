//! `everything`: the tools the official MCP conformance suite calls, with the
//! names and outputs it expects. Also a tour of every content type.

use std::time::Duration;

use hangar_sdk::{
    CallContext, CallResult, ContentBlock, LogLevel, Tool, ToolDefinition, ToolError, json, log,
    progress,
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

impl Tool for Everything {
    fn list_tools() -> Vec<ToolDefinition> {
        TOOLS
            .iter()
            .map(|(name, description)| {
                ToolDefinition::new(
                    name,
                    description,
                    json!({ "type": "object", "properties": {} }),
                )
            })
            .collect()
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        _arguments: String,
    ) -> Result<CallResult, ToolError> {
        let pause = || std::thread::sleep(Duration::from_millis(50));
        Ok(match name.as_str() {
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

hangar_sdk::export_tool!(Everything);
