//! `[uploads]` and `[artifacts]`: where files in and out of tools are kept,
//! how much of them, and for how long.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

/// `[files]`: what uploads and artifacts share.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FilesConfig {
    /// A folder Hangar and its upstream servers both see (the same machine
    /// for stdio upstreams, a shared volume for HTTP ones): uploads are
    /// kept in `uploads/` and artifacts in `artifacts/` under it, so an
    /// upstream's tools can be handed uploads and leave artifacts
    /// (`[upstreams.NAME.adapters]`). Replaces `[uploads] dir` and
    /// `[artifacts] dir`.
    pub shared_dir: Option<PathBuf>,
}

/// `[uploads]`: files a client stages with `POST /uploads` for tools that
/// consume them (`consumes_uploads`).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct UploadsConfig {
    /// Where uploads are kept; default `<cache_dir>/uploads`.
    pub dir: Option<PathBuf>,
    /// Largest file.
    pub max_file_bytes: u64,
    /// Bytes one session (or principal) may keep at once.
    pub max_session_bytes: u64,
    /// Files one session (or principal) may keep at once.
    pub max_session_files: u32,
    /// Bytes every session together may keep.
    pub max_total_bytes: u64,
    /// How long an upload is kept.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub ttl: Duration,
}

impl Default for UploadsConfig {
    fn default() -> Self {
        UploadsConfig {
            dir: None,
            max_file_bytes: 10 << 20,
            max_session_bytes: 50 << 20,
            max_session_files: 32,
            max_total_bytes: 1 << 30,
            ttl: Duration::from_secs(3600),
        }
    }
}

/// `[artifacts]`: files tools leave in their `/artifacts` directory
/// (`produces_artifacts`).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ArtifactsConfig {
    /// Where artifacts are kept; default `<cache_dir>/artifacts`.
    pub dir: Option<PathBuf>,
    /// Largest artifact.
    pub max_file_bytes: u64,
    /// Bytes of artifacts one session (or principal) may keep at once.
    pub max_session_bytes: u64,
    /// Artifacts one session (or principal) may keep at once.
    pub max_session_files: u32,
    /// Bytes every session together may keep.
    pub max_total_bytes: u64,
    /// How long an artifact is kept.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub ttl: Duration,
    /// How long a signed download URL is good for.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub url_ttl: Duration,
    /// The HMAC key download URLs are signed with (may be `{{ env.VAR }}`);
    /// unset: a random key per process (URLs end with the process).
    pub signing_key: Option<String>,
    /// The base of absolute download URLs (e.g. `https://mcp.example.com`);
    /// unset: `http://` and the request's `Host`.
    pub public_url: Option<String>,
}

impl Default for ArtifactsConfig {
    fn default() -> Self {
        ArtifactsConfig {
            dir: None,
            max_file_bytes: 10 << 20,
            max_session_bytes: 50 << 20,
            max_session_files: 32,
            max_total_bytes: 1 << 30,
            ttl: Duration::from_secs(3600),
            url_ttl: Duration::from_secs(900),
            signing_key: None,
            public_url: None,
        }
    }
}
