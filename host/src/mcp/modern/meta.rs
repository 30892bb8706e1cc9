//! A modern request's `params._meta`: the protocol version, the client's
//! capabilities, and the log level it opted in to. (`clientInfo` is a
//! SHOULD and is not read.)

use serde_json::Value;

use hangar_core::call::LogLevel;

/// What a modern request says about itself. There is no session to keep
/// this in: every request carries it again.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub version: String,
    /// `io.modelcontextprotocol/clientCapabilities`, an object.
    pub capabilities: Value,
    /// `io.modelcontextprotocol/logLevel`: without it, the request gets no
    /// `notifications/message`.
    pub log_level: Option<LogLevel>,
}

impl RequestMeta {
    /// Reads `_meta`; the error says which required field is missing or wrong.
    pub fn parse(meta: Option<&Value>) -> Result<RequestMeta, String> {
        let Some(meta) = meta.and_then(Value::as_object) else {
            return Err(
                "params._meta is required (protocol version and client capabilities)".into(),
            );
        };
        let version = match meta.get("io.modelcontextprotocol/protocolVersion") {
            Some(Value::String(v)) => v.clone(),
            Some(_) => {
                return Err(
                    "_meta io.modelcontextprotocol/protocolVersion must be a string".into(),
                );
            }
            None => return Err("_meta io.modelcontextprotocol/protocolVersion is required".into()),
        };
        let capabilities = match meta.get("io.modelcontextprotocol/clientCapabilities") {
            Some(c @ Value::Object(_)) => c.clone(),
            Some(_) => {
                return Err(
                    "_meta io.modelcontextprotocol/clientCapabilities must be an object".into(),
                );
            }
            None => {
                return Err("_meta io.modelcontextprotocol/clientCapabilities is required".into());
            }
        };
        let log_level = match meta.get("io.modelcontextprotocol/logLevel") {
            None | Some(Value::Null) => None,
            Some(level) => Some(serde_json::from_value(level.clone()).map_err(|_| {
                "_meta io.modelcontextprotocol/logLevel must be one of debug, info, notice, warning, error, critical, alert, emergency".to_string()
            })?),
        };
        Ok(RequestMeta {
            version,
            capabilities,
            log_level,
        })
    }

    /// Whether the client declared `name` (`elicitation`, `sampling`, `roots`).
    pub fn declares(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(Value::is_object)
    }

    /// Whether the client declared the extension `name` (under `extensions`).
    pub fn declares_extension(&self, name: &str) -> bool {
        (self.capabilities.get("extensions"))
            .and_then(|e| e.get(name))
            .is_some_and(Value::is_object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_fields_and_the_optional_ones() {
        assert!(RequestMeta::parse(None).is_err());
        let no_caps = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28" });
        assert!(
            RequestMeta::parse(Some(&no_caps))
                .unwrap_err()
                .contains("clientCapabilities")
        );
        let ok = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": { "sampling": {} },
            "io.modelcontextprotocol/logLevel": "info",
        });
        let meta = RequestMeta::parse(Some(&ok)).unwrap();
        assert!(meta.declares("sampling") && !meta.declares("elicitation"));
        assert_eq!(meta.log_level, Some(LogLevel::Info));
        let bad_level = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/logLevel": "loud",
        });
        assert!(RequestMeta::parse(Some(&bad_level)).is_err());
    }
}
