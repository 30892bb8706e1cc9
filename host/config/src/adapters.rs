//! `[upstreams.NAME.adapters."tool"]`: files handed to an upstream's tools
//! and recovered from them, through `[files] shared_dir` (a folder Hangar
//! and the upstream both see). This file owns the schema and its checks;
//! what a call does with them is the pipeline's (`pipeline/handoff.rs`).

use schemars::JsonSchema;
use serde::Deserialize;

/// What Hangar does around one upstream tool's calls.
///
/// ```toml
/// [upstreams.fs.adapters.read_text_file]
/// kind = "upload_consumer"
/// arguments = ["path"]
///
/// [upstreams.fs.adapters.write_file]
/// kind = "artifact_producer"
/// output_path_argument = "path"
/// output_locator = { mode = "none" }
/// allow_artifacts_download = true
/// ```
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdapterConfig {
    pub kind: AdapterKind,
    /// `upload_consumer`: the arguments that take `upload://` handles, by
    /// name or as JSON pointers (`/options/file`); each handle becomes the
    /// staged file's absolute path under `shared_dir`.
    #[serde(default)]
    pub arguments: Vec<String>,
    /// `artifact_producer`: the argument Hangar fills with the path the
    /// tool is to write its file to
    /// (`shared_dir/artifacts/<session>/<call>/<name>`).
    pub output_path_argument: Option<String>,
    /// `artifact_producer`: how the file is found after the call.
    #[serde(default)]
    pub output_locator: OutputLocator,
    /// `artifact_producer`: keep the image or embedded resource block the
    /// artifact was made from in the result's content.
    #[serde(default)]
    pub allow_raw_output: bool,
    /// `artifact_producer`: add a signed download URL to `_meta.artifact`
    /// and a plain-text link to the content.
    #[serde(default)]
    pub allow_artifacts_download: bool,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AdapterKind {
    /// Its `arguments` take uploads.
    UploadConsumer,
    /// It writes a file that becomes an `artifact://`.
    ArtifactProducer,
}

/// Where an `artifact_producer`'s file is after its call.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, PartialEq)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum OutputLocator {
    /// Only at the path Hangar gave it (`output_path_argument`).
    #[default]
    None,
    /// A path in the text content: the pattern's first capture group, or
    /// its whole match.
    Regex { pattern: String },
    /// A path at a JSON pointer in `structuredContent`.
    Structured { pointer: String },
    /// The bytes of the first image or embedded resource block.
    Embedded,
}

impl AdapterConfig {
    /// Checks one adapter of upstream `upstream` for tool `tool`.
    pub fn validate(&self, upstream: &str, tool: &str) -> Result<(), String> {
        let at = format!("[upstreams.{upstream}.adapters.{tool:?}]");
        match self.kind {
            AdapterKind::UploadConsumer => {
                if self.arguments.is_empty() {
                    return Err(format!(
                        "{at}: an upload_consumer names its arguments (arguments = [\"path\"])"
                    ));
                }
                let producing = self.output_path_argument.is_some()
                    || self.output_locator != OutputLocator::None
                    || self.allow_raw_output
                    || self.allow_artifacts_download;
                if producing {
                    return Err(format!(
                        "{at}: output_path_argument, output_locator, allow_raw_output and allow_artifacts_download are an artifact_producer's"
                    ));
                }
            }
            AdapterKind::ArtifactProducer => {
                if !self.arguments.is_empty() {
                    return Err(format!("{at}: arguments are an upload_consumer's"));
                }
                if self.output_path_argument.is_none() && self.output_locator == OutputLocator::None
                {
                    return Err(format!(
                        "{at}: an artifact_producer needs output_path_argument, an output_locator, or both"
                    ));
                }
            }
        }
        for argument in self.arguments.iter().chain(&self.output_path_argument) {
            if argument.is_empty() || (argument.contains('/') && !argument.starts_with('/')) {
                return Err(format!(
                    "{at}: {argument:?} is neither an argument name nor a JSON pointer (\"/a/b\")"
                ));
            }
        }
        match &self.output_locator {
            OutputLocator::Regex { pattern } => {
                regex::Regex::new(pattern)
                    .map_err(|e| format!("{at}: output_locator pattern: {e}"))?;
            }
            OutputLocator::Structured { pointer } if !pointer.starts_with('/') => {
                return Err(format!(
                    "{at}: output_locator pointer {pointer:?} is not a JSON pointer (\"/path\")"
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(text: &str) -> Result<AdapterConfig, String> {
        let a: AdapterConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        a.validate("fs", "t").map(|()| a)
    }

    #[test]
    fn adapters_are_checked_for_their_kind() {
        let a = adapter("kind = \"upload_consumer\"\narguments = [\"path\", \"/o/file\"]").unwrap();
        assert_eq!(a.kind, AdapterKind::UploadConsumer);
        assert!(adapter("kind = \"upload_consumer\"").is_err());
        assert!(adapter("kind = \"upload_consumer\"\narguments = [\"a/b\"]").is_err());
        let p = adapter(
            "kind = \"artifact_producer\"\noutput_locator = { mode = \"regex\", pattern = \"saved to (\\\\S+)\" }",
        )
        .unwrap();
        assert!(matches!(p.output_locator, OutputLocator::Regex { .. }));
        assert!(adapter("kind = \"artifact_producer\"").is_err());
        let bad = adapter(
            "kind = \"artifact_producer\"\noutput_locator = { mode = \"regex\", pattern = \"(\" }",
        )
        .unwrap_err();
        assert!(bad.contains("pattern"), "{bad}");
        assert!(
            adapter("kind = \"artifact_producer\"\noutput_locator = { mode = \"structured\", pointer = \"path\" }")
                .is_err()
        );
        assert!(
            adapter("kind = \"artifact_producer\"\noutput_locator = { mode = \"embedded\" }")
                .is_ok()
        );
        assert!(adapter("kind = \"other\"").is_err());
    }
}
