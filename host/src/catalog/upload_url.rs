//! The `NAME_get_upload_url` helper tool of an upstream whose tools take
//! uploads (`catalog::adapters` makes it; the pipeline answers it).

use std::time::Duration;

/// The end of the helper tool's name, after the upstream's.
pub const UPLOAD_URL_SUFFIX: &str = "_get_upload_url";

/// The `NAME_get_upload_url` tool: where and how this server takes uploads.
#[derive(Debug)]
pub struct UploadUrl {
    /// The upstream's tools (catalog names) and arguments that take handles.
    pub consumers: Vec<String>,
    /// `[artifacts] public_url`, else `[server] public_url`: the base of the
    /// upload URL (else `http://` and the request's `Host`).
    pub public_url: Option<String>,
    pub ttl: Duration,
    pub max_file_bytes: u64,
}
