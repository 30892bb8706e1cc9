//! Files around a tool's execution: the `upload://` handles of its
//! arguments resolved for the caller, the folders a component sees, the
//! artifacts it leaves, and `artifact://` resources read back.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use super::setup::Pipeline;
use crate::catalog::{Backend, CatalogTool};
use hangar_core::call::{
    CallContext, CallError, Content, ErrorKind, ReadResult, ResourceContents, ResourceDef, Stage,
    ToolResult,
};
use hangar_core::files::{
    ARTIFACT_SCHEME, Area, CallFiles, Entry, Files, GUEST_ARTIFACTS, GUEST_UPLOADS, StoreError,
    UPLOAD_SCHEME,
};
use hangar_runtime::{Preopens, WriteCap};

/// What a call's tool gets besides its arguments.
#[derive(Default)]
pub(super) struct Staged {
    /// The folders of a component's call.
    pub call: Option<CallFiles>,
    /// A DB tool's uploads, by argument.
    pub blobs: HashMap<String, bytes::Bytes>,
    /// What the component may write into its artifacts folder. Declared
    /// after `call`: its bytes leave the quota counters only once the
    /// call's files are stored (or removed).
    write_cap: Option<Arc<WriteCap>>,
    /// An upstream `artifact_producer`'s call (`adapters`).
    pub handoff: Option<super::adapters::Handoff>,
}

impl Staged {
    /// The folders the component mounts.
    pub fn preopens(&self) -> Preopens {
        let mut preopens = Preopens::default();
        if let Some(call) = &self.call {
            if let Some(dir) = &call.uploads_dir {
                preopens.read_only(dir.clone(), GUEST_UPLOADS);
            }
            if let (Some(dir), Some(cap)) = (&call.artifacts_dir, &self.write_cap) {
                preopens.writable(dir.clone(), GUEST_ARTIFACTS, cap.clone());
            }
        }
        preopens
    }
}

/// Whose files a call may use: its MCP session's, else its principal's.
pub(super) fn area_of(cx: &CallContext) -> Option<Area> {
    Area::of(
        cx.session_id.as_deref(),
        cx.principal.as_ref().map(|p| p.subject.as_str()),
    )
}

fn invalid(message: String) -> CallError {
    CallError::new(Stage::Validate, ErrorKind::Invalid, message)
}

/// The upload handles in `value` (a string, or an array of strings), each
/// with where it sits, so it can be replaced.
fn handles(value: &mut Value) -> Vec<&mut String> {
    match value {
        Value::String(s) if s.starts_with(UPLOAD_SCHEME) => vec![s],
        Value::Array(items) => items
            .iter_mut()
            .filter_map(|v| match v {
                Value::String(s) if s.starts_with(UPLOAD_SCHEME) => Some(s),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl Pipeline {
    /// Resolves the upload handles of the tool's `consumes_uploads`
    /// arguments for the caller, and readies the component's folders. A
    /// component's argument becomes the path it sees the file at
    /// (`/uploads/<id>/<name>`); a DB tool's argument stays the handle and
    /// its bytes are bound in its place.
    pub(super) async fn stage_files(
        &self,
        tool: &CatalogTool,
        args: &mut Value,
        cx: &CallContext,
    ) -> Result<Staged, CallError> {
        let stages = &tool.stages;
        let component = matches!(tool.backend, Backend::Wasm { .. });
        let produces = stages.produces_artifacts && component;
        let adapter = match &tool.backend {
            Backend::Upstream { upstream, remote } => upstream.adapter(remote),
            _ => None,
        };
        if stages.consumes_uploads.is_empty() && !produces && adapter.is_none() {
            return Ok(Staged::default());
        }
        let files = self.files.as_ref().ok_or_else(|| {
            CallError::new(
                Stage::Handler,
                ErrorKind::Failed,
                "uploads and artifacts are not available on this server",
            )
        })?;
        let area = area_of(cx);
        let name = &tool.def.name;
        let mut staged = Staged::default();
        let mut uploads: Vec<Arc<Entry>> = Vec::new();
        for arg in &stages.consumes_uploads {
            let Some(value) = super::adapters::argument_mut(args, arg) else {
                continue;
            };
            for handle in handles(value) {
                let entry = files
                    .resolve_upload(area.as_ref(), handle)
                    .map_err(|m| invalid(format!("{arg}: {m}")))?;
                match &tool.backend {
                    Backend::Wasm { .. } => {
                        *handle = format!("{GUEST_UPLOADS}/{}/{}", entry.id, entry.name);
                        if !uploads.iter().any(|u| Arc::ptr_eq(u, &entry)) {
                            uploads.push(entry);
                        }
                    }
                    Backend::Sql(_) => {
                        let bytes = files
                            .read_entry(&entry)
                            .await
                            .map_err(|_| invalid(format!("{arg}: {handle}: the upload is gone")))?;
                        staged.blobs.insert(arg.clone(), bytes.into());
                    }
                    // The upstream is handed the file's path in the shared folder.
                    Backend::Upstream { .. }
                        if adapter.is_some_and(|a| a.arguments.contains(arg))
                            && files.shared_dir().is_some() =>
                    {
                        *handle = entry.path().display().to_string();
                    }
                    Backend::Upstream { .. } | Backend::UploadUrl(_) => {
                        return Err(invalid(format!(
                            "{arg}: tool {name} is an upstream server's: upload handles are passed on only to an upload_consumer adapter's arguments"
                        )));
                    }
                }
            }
        }
        if let Some(adapter) = adapter
            && adapter.kind == hangar_config::AdapterKind::ArtifactProducer
        {
            let (call, handoff) =
                super::adapters::stage_output(files, adapter, args, area.clone())?;
            staged.call = Some(call);
            staged.handoff = Some(handoff);
        }
        if component && (produces || !uploads.is_empty()) {
            let call = files
                .prepare_call(area, &uploads, produces)
                .map_err(|m| CallError::new(Stage::Handler, ErrorKind::Failed, m))?;
            // Writes fail inside the guest once a quota is reached, rather
            // than being measured only after the call.
            staged.write_cap = call
                .artifacts_dir
                .is_some()
                .then(|| WriteCap::new(call.artifacts_quota.clone(), call.max_artifact_bytes));
            staged.call = Some(call);
        }
        Ok(staged)
    }

    /// Turns what the component left in `/artifacts` into artifacts, linked
    /// from the result (`resource_link` blocks, and `_meta["hangar/artifacts"]`
    /// with each one's download URL). A failed call's are discarded when
    /// `staged` drops.
    pub(super) async fn finish_files(
        &self,
        staged: &Staged,
        outcome: &mut Result<ToolResult, CallError>,
        cx: &CallContext,
    ) {
        if let (Some(handoff), Some(call)) = (&staged.handoff, &staged.call) {
            return self.finish_handoff(handoff, call, outcome, cx).await;
        }
        let (Some(call), Some(files)) = (&staged.call, &self.files) else {
            return;
        };
        if call.artifacts_dir.is_none() {
            return;
        }
        // A failed call's files are removed with its folders.
        let result = match outcome {
            Ok(result) if !result.is_error => result,
            _ => return,
        };
        let entries = match files.collect_artifacts(call).await {
            Ok(entries) => entries,
            Err(e) => {
                let kind = match e {
                    StoreError::Quota(_) => ErrorKind::Limit,
                    _ => ErrorKind::Failed,
                };
                *outcome = Err(CallError::new(
                    Stage::Handler,
                    kind,
                    format!("artifacts: {e}; none were kept"),
                ));
                return;
            }
        };
        if entries.is_empty() {
            return;
        }
        let host = cx.host();
        let mut listed = Vec::new();
        for e in &entries {
            let url = files.download_url(e, host.as_deref());
            result.content.push(Content::ResourceLink {
                uri: e.artifact_uri(),
                name: e.name.clone(),
                description: Some(format!("An artifact of {} bytes", e.size)),
                mime_type: Some(e.mime_type.clone()),
            });
            listed.push(json!({
                "uri": e.artifact_uri(),
                "name": e.name,
                "size": e.size,
                "mimeType": e.mime_type,
                "url": url,
                "expiresIn": e.expires_in(),
            }));
        }
        result.set_meta("hangar/artifacts", Value::Array(listed));
    }

    /// The artifacts the caller's session (or principal) holds, as resources.
    pub fn listed_artifacts(
        &self,
        session_id: Option<&str>,
        subject: Option<&str>,
    ) -> Vec<ResourceDef> {
        let (Some(files), Some(area)) = (&self.files, Area::of(session_id, subject)) else {
            return Vec::new();
        };
        files
            .artifacts_of(&area)
            .iter()
            .map(|e| ResourceDef {
                uri: e.artifact_uri(),
                name: e.name.clone(),
                title: None,
                description: Some(format!("An artifact of call {}", e.id)),
                mime_type: Some(e.mime_type.clone()),
                size: Some(e.size),
                meta: None,
            })
            .collect()
    }

    /// `resources/read` of an `artifact://` URI: its bytes as `text` when
    /// its type is text and they are UTF-8, else as a base64 `blob`. Another
    /// session's artifact is not found.
    pub(super) async fn read_artifact(
        &self,
        uri: &str,
        cx: &CallContext,
    ) -> Result<ReadResult, CallError> {
        let files = (self.files.as_ref()).ok_or_else(|| CallError::resource_not_found(uri))?;
        let entry = (files.artifact(area_of(cx).as_ref(), uri))
            .ok_or_else(|| CallError::resource_not_found(uri))?;
        let bytes = files
            .read_entry(&entry)
            .await
            .map_err(|_| CallError::resource_not_found(uri))?;
        let (text, blob) = match (entry.is_text(), String::from_utf8(bytes)) {
            (true, Ok(text)) => (Some(text), None),
            (_, Ok(text)) => (None, Some(B64.encode(text.as_bytes()))),
            (_, Err(e)) => (None, Some(B64.encode(e.as_bytes()))),
        };
        Ok(ReadResult {
            contents: vec![ResourceContents {
                uri: uri.to_string(),
                mime_type: Some(entry.mime_type.clone()),
                text,
                blob,
                meta: None,
            }],
            meta: None,
        })
    }

    pub fn files(&self) -> Option<&Arc<Files>> {
        self.files.as_ref()
    }
}

/// Whether `uri` names an artifact.
pub(super) fn is_artifact(uri: &str) -> bool {
    uri.starts_with(ARTIFACT_SCHEME)
}
