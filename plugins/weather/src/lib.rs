//! `weather`: an HTTP tool. `weather.forecast {city}` asks a JSON API for
//! `GET {base_url}/forecast?city=<city>` through `wasi:http` (with `wstd`)
//! and answers the JSON as structured content plus a one-line summary.
//!
//! The API's base URL is the plugin's config key `base_url`; the operator
//! grants its host:
//!
//! ```toml
//! [plugins.weather]
//! config = { base_url = "https://api.example.org/v1" }
//! grants = { http = ["api.example.org"] }
//! ```
//!
//! Without a grant every request is refused, and the tool says so.

use hangar_sdk::{
    CallContext, CallResult, Tool, ToolDefinition, ToolError, config, json, parse_args,
};
use serde::Deserialize;
use serde_json::Value;
use wstd::http::{Body, Client, Request};

struct Weather;

#[derive(Deserialize)]
struct Args {
    city: String,
}

/// Percent-encodes a query value (unreserved characters stay as they are).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// GETs `url`; answers the status and the body.
async fn get(url: &str) -> wstd::http::Result<(u16, Vec<u8>)> {
    let request = Request::get(url)
        .header("accept", "application/json")
        .body(Body::empty())?;
    let response = Client::new().send(request).await?;
    let status = response.status().as_u16();
    let bytes = response.into_body().contents().await?.to_vec();
    Ok((status, bytes))
}

/// A short line for people; the JSON itself is the structured content.
fn summary(city: &str, forecast: &Value) -> String {
    let field = |k: &str| forecast.get(k).filter(|v| !v.is_null());
    let mut parts = Vec::new();
    if let Some(s) = field("summary").and_then(Value::as_str) {
        parts.push(s.to_string());
    }
    if let Some(t) = field("temperature_c") {
        parts.push(format!("{t} °C"));
    }
    if parts.is_empty() {
        format!("Forecast for {city}: {forecast}")
    } else {
        format!("Forecast for {city}: {}", parts.join(", "))
    }
}

impl Tool for Weather {
    fn list_tools() -> Vec<ToolDefinition> {
        vec![
            ToolDefinition::new(
                "weather.forecast",
                "The weather forecast for a city, from the configured weather API",
                json!({
                    "type": "object",
                    "properties": {
                        "city": { "type": "string", "description": "City name, e.g. Lisbon" }
                    },
                    "required": ["city"]
                }),
            )
            .title("Weather forecast")
            .read_only(),
        ]
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        if name != "weather.forecast" {
            return Err(ToolError::new(format!("unknown tool {name}")));
        }
        let args: Args = parse_args(&arguments)?;
        if args.city.trim().is_empty() {
            return Err(ToolError::new("city must not be empty"));
        }
        let base = config("base_url")
            .ok_or_else(|| ToolError::new("weather: no base_url in [plugins.weather] config"))?;
        let url = format!(
            "{}/forecast?city={}",
            base.trim_end_matches('/'),
            encode(&args.city)
        );
        let (status, body) = wstd::runtime::block_on(get(&url))
            .map_err(|e| ToolError::new(format!("weather: request failed: {e:?}")))?;
        if !(200..300).contains(&status) {
            let text = String::from_utf8_lossy(&body);
            let text: String = text.chars().take(200).collect();
            return Err(ToolError::new(format!(
                "weather: the API answered {status}: {text}"
            )));
        }
        let forecast: Value = serde_json::from_slice(&body)
            .map_err(|e| ToolError::new(format!("weather: the API answered invalid JSON: {e}")))?;
        Ok(CallResult::text(summary(&args.city, &forecast)).with_structured(forecast))
    }
}

hangar_sdk::export_tool!(Weather);
