//! An upstream's tools with adapters (`[upstreams.NAME.adapters]`): an
//! `artifact_producer`'s output path chosen and handed to it, the file it
//! leaves found (`output_locator`) and kept as an artifact of the caller's
//! session, and the answer of the `NAME_get_upload_url` helper. An
//! `upload_consumer`'s handles become paths in `files.rs`, beside every
//! other tool's handles.
//!
//! The upstream is a peer like any other: a path it returns is taken only
//! as `Files::take_file` allows (a plain file inside `[files] shared_dir`,
//! not another session's), and one it may not take fails the call.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use super::setup::Pipeline;
use crate::catalog::upload_url::UploadUrl;
use hangar_config::{AdapterConfig, OutputLocator};
use hangar_core::call::{CallContext, CallError, Content, ErrorKind, Stage, ToolResult};
use hangar_core::files::{Area, CallFiles, Files, StoreError, Untaken, check_name};

/// What an `artifact_producer`'s call carries to its end.
pub(super) struct Handoff {
    adapter: AdapterConfig,
    /// The path handed to the tool (`output_path_argument`).
    given: Option<PathBuf>,
}

/// Where the file of a call was found.
enum Found {
    /// A path the tool named (or was given).
    Path(String),
    /// Bytes it returned inline (`embedded`): the content block they are in.
    Inline {
        name: String,
        bytes: Vec<u8>,
        block: usize,
    },
}

/// The argument `argument` of `args`: a name, or a JSON pointer.
pub(super) fn argument_mut<'a>(args: &'a mut Value, argument: &str) -> Option<&'a mut Value> {
    if argument.starts_with('/') {
        args.pointer_mut(argument)
    } else {
        args.get_mut(argument)
    }
}

/// Sets `argument` (a name, or a JSON pointer whose missing objects are
/// made) in `args`.
fn set_argument(args: &mut Value, argument: &str, value: Value) {
    let steps: Vec<&str> = match argument.strip_prefix('/') {
        Some(pointer) => pointer.split('/').collect(),
        None => vec![argument],
    };
    let mut at = args;
    for step in &steps[..steps.len() - 1] {
        if !at.is_object() {
            *at = json!({});
        }
        at = at
            .as_object_mut()
            .expect("an object")
            .entry(step.to_string())
            .or_insert_with(|| json!({}));
    }
    if !at.is_object() {
        *at = json!({});
    }
    let last = steps[steps.len() - 1].to_string();
    at.as_object_mut().expect("an object").insert(last, value);
}

fn failed(kind: ErrorKind, message: String) -> CallError {
    CallError::new(Stage::Upstream, kind, message)
}

/// Readies an `artifact_producer`'s call: a folder of its own under
/// `shared_dir/artifacts/<area>/`, and the path in it handed to the tool
/// (named by the file name the caller gave, else `output`).
pub(super) fn stage_output(
    files: &Files,
    adapter: &AdapterConfig,
    args: &mut Value,
    area: Option<Area>,
) -> Result<(CallFiles, Handoff), CallError> {
    let call = (files.prepare_call(area, &[], true))
        .map_err(|m| CallError::new(Stage::Handler, ErrorKind::Failed, m))?;
    let folder = call
        .artifacts_dir
        .clone()
        .expect("an artifacts folder was asked for");
    let given = adapter.output_path_argument.as_ref().map(|argument| {
        let name = argument_mut(args, argument)
            .and_then(|v| v.as_str())
            .and_then(|s| Path::new(s).file_name()?.to_str())
            .filter(|n| check_name(n).is_ok())
            .unwrap_or("output")
            .to_string();
        let path = folder.join(name);
        set_argument(args, argument, Value::String(path.display().to_string()));
        path
    });
    Ok((
        call,
        Handoff {
            adapter: adapter.clone(),
            given,
        },
    ))
}

impl Pipeline {
    /// After an `artifact_producer`'s successful call: the file it left is
    /// found, taken into its folder and kept as an artifact, linked from the
    /// result (`resource_link`, `_meta.artifact`). A file it may not take
    /// fails the call; none found leaves the result as it was.
    pub(super) async fn finish_handoff(
        &self,
        handoff: &Handoff,
        call: &CallFiles,
        outcome: &mut Result<ToolResult, CallError>,
        cx: &CallContext,
    ) {
        let Some(files) = &self.files else {
            return;
        };
        let Some(folder) = call.artifacts_dir.clone() else {
            return;
        };
        let result = match outcome {
            Ok(result) if !result.is_error => result,
            _ => return,
        };
        let found = locate(&handoff.adapter, result);
        let given = handoff.given.clone();
        let taker = files.clone();
        let work = folder.clone();
        let taken = tokio::task::spawn_blocking(move || {
            let taken = take(&taker, &work, found, given);
            taker.clear_strays(&work);
            taken
        })
        .await
        .unwrap_or_else(|e| Err(Untaken::Io(e.to_string())));
        let (name, block) = match taken {
            Ok(Some(taken)) => taken,
            Ok(None) => return,
            Err(e) => {
                let kind = match e {
                    Untaken::TooLarge(_) => ErrorKind::Limit,
                    _ => ErrorKind::Failed,
                };
                *outcome = Err(failed(kind, format!("the tool's file: {e}")));
                return;
            }
        };
        let entries = match files.collect_artifacts(call).await {
            Ok(entries) => entries,
            Err(e) => {
                let kind = match e {
                    StoreError::Quota(_) => ErrorKind::Limit,
                    _ => ErrorKind::Failed,
                };
                *outcome = Err(failed(kind, format!("artifacts: {e}; none were kept")));
                return;
            }
        };
        let Some(entry) = entries.iter().find(|e| e.name == name) else {
            return;
        };
        if let Some(block) = block
            && !handoff.adapter.allow_raw_output
        {
            result.content.remove(block);
        }
        for e in &entries {
            result.content.push(Content::ResourceLink {
                uri: e.artifact_uri(),
                name: e.name.clone(),
                description: Some(format!("An artifact of {} bytes", e.size)),
                mime_type: Some(e.mime_type.clone()),
            });
        }
        let mut artifact = json!({
            "artifact_uri": entry.artifact_uri(),
            "name": entry.name,
            "size": entry.size,
            "mimeType": entry.mime_type,
        });
        if handoff.adapter.allow_artifacts_download {
            let url = files.download_url(entry, cx.host().as_deref());
            result.content.push(Content::Text {
                text: format!("Download {}: {url}", entry.name),
            });
            artifact["download_url"] = Value::String(url);
        }
        result.set_meta("artifact", artifact);
    }
}

/// Where `adapter`'s locator says the call's file is, if it says anything.
fn locate(adapter: &AdapterConfig, result: &ToolResult) -> Option<Found> {
    match &adapter.output_locator {
        OutputLocator::None => None,
        OutputLocator::Regex { pattern } => {
            // Checked when the config loaded.
            let regex = regex::Regex::new(pattern).ok()?;
            result.content.iter().find_map(|c| match c {
                Content::Text { text } => {
                    let captures = regex.captures(text)?;
                    let m = captures.get(1).or_else(|| captures.get(0))?;
                    Some(Found::Path(m.as_str().trim().to_string()))
                }
                _ => None,
            })
        }
        OutputLocator::Structured { pointer } => {
            let value = result.structured_content.as_ref()?.pointer(pointer)?;
            Some(Found::Path(value.as_str()?.to_string()))
        }
        OutputLocator::Embedded => result.content.iter().enumerate().find_map(|(block, c)| {
            inline(c).map(|(name, bytes)| Found::Inline { name, bytes, block })
        }),
    }
}

/// The name and bytes of an image or embedded resource block.
fn inline(content: &Content) -> Option<(String, Vec<u8>)> {
    match content {
        Content::Image { data, mime_type } => {
            let ext = match mime_type.as_str() {
                "image/png" => "png",
                "image/jpeg" => "jpg",
                "image/gif" => "gif",
                "image/webp" => "webp",
                _ => "bin",
            };
            Some((format!("image.{ext}"), B64.decode(data).ok()?))
        }
        Content::Resource { resource } => {
            let name = resource
                .uri
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string();
            let bytes = match (&resource.blob, &resource.text) {
                (Some(blob), _) => B64.decode(blob).ok()?,
                (None, Some(text)) => text.clone().into_bytes(),
                (None, None) => return None,
            };
            Some((name, bytes))
        }
        _ => None,
    }
}

/// Takes what was found (else the file at the path handed to the tool)
/// into `folder`: its name there, and the content block it came from.
/// `None`: no file.
fn take(
    files: &Files,
    folder: &Path,
    found: Option<Found>,
    given: Option<PathBuf>,
) -> Result<Option<(String, Option<usize>)>, Untaken> {
    match found {
        Some(Found::Inline { name, bytes, block }) => {
            return files
                .keep_bytes(folder, &name, &bytes)
                .map(|name| Some((name, Some(block))));
        }
        Some(Found::Path(path)) => match files.take_file(folder, &path) {
            Ok(name) => return Ok(Some((name, None))),
            Err(Untaken::Missing) => {}
            Err(e) => return Err(e),
        },
        None => {}
    }
    let Some(given) = given else {
        return Ok(None);
    };
    match files.take_file(folder, &given.display().to_string()) {
        Ok(name) => Ok(Some((name, None))),
        Err(Untaken::Missing) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The `NAME_get_upload_url` helper's answer for the caller of `cx`.
pub(super) fn upload_url(helper: &Arc<UploadUrl>, cx: &CallContext) -> ToolResult {
    let base = match (&helper.public_url, cx.host()) {
        (Some(url), _) => url.clone(),
        (None, Some(host)) => format!("http://{host}"),
        (None, None) => "http://<this server>".to_string(),
    };
    let url = format!("{base}/uploads");
    let mut headers = serde_json::Map::new();
    let mut curl = String::from("curl -X POST");
    if let Some(sid) = &cx.session_id {
        headers.insert("Mcp-Session-Id".into(), Value::String(sid.clone()));
        curl.push_str(&format!(" -H 'Mcp-Session-Id: {sid}'"));
    } else {
        curl.push_str(" -H 'Authorization: Bearer <your token>'");
    }
    curl.push_str(&format!(" -F 'file=@FILE' {url}"));
    let answer = json!({
        "upload_url": url,
        "method": "POST",
        "headers": headers,
        "form_field": "file",
        "ttl_seconds": helper.ttl.as_secs(),
        "max_file_bytes": helper.max_file_bytes,
        "consumers": helper.consumers,
        "curl": curl,
    });
    ToolResult {
        content: vec![Content::Text {
            text: format!(
                "Upload with a multipart POST to {url} (send the headers given), then pass the upload:// handle the answer lists to the tool. Uploads are kept {} s.\n{curl}",
                helper.ttl.as_secs()
            ),
        }],
        structured_content: Some(answer),
        is_error: false,
        meta: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_set_by_name_or_pointer() {
        let mut args = json!({ "a": 1 });
        set_argument(&mut args, "path", json!("/x"));
        set_argument(&mut args, "/opts/out/file", json!("/y"));
        assert_eq!(
            args,
            json!({ "a": 1, "path": "/x", "opts": { "out": { "file": "/y" } } })
        );
        assert_eq!(
            argument_mut(&mut args, "/opts/out/file"),
            Some(&mut json!("/y"))
        );
        assert_eq!(argument_mut(&mut args, "path"), Some(&mut json!("/x")));
    }

    #[test]
    fn locators_find_the_path_or_the_bytes() {
        let result = |content: Vec<Content>, structured: Option<Value>| ToolResult {
            content,
            structured_content: structured,
            is_error: false,
            meta: None,
        };
        let regex: AdapterConfig = toml::from_str(
            "kind = \"artifact_producer\"\noutput_locator = { mode = \"regex\", pattern = \"saved to (\\\\S+)\" }",
        )
        .unwrap();
        let text = result(
            vec![Content::Text {
                text: "ok, saved to /s/a.png now".into(),
            }],
            None,
        );
        assert!(matches!(locate(&regex, &text), Some(Found::Path(p)) if p == "/s/a.png"));
        let structured: AdapterConfig = toml::from_str(
            "kind = \"artifact_producer\"\noutput_locator = { mode = \"structured\", pointer = \"/out/path\" }",
        )
        .unwrap();
        let r = result(vec![], Some(json!({ "out": { "path": "/s/b.txt" } })));
        assert!(matches!(locate(&structured, &r), Some(Found::Path(p)) if p == "/s/b.txt"));
        let embedded: AdapterConfig = toml::from_str(
            "kind = \"artifact_producer\"\noutput_locator = { mode = \"embedded\" }",
        )
        .unwrap();
        let r = result(
            vec![
                Content::Text {
                    text: "here".into(),
                },
                Content::Image {
                    data: B64.encode(b"PNG"),
                    mime_type: "image/png".into(),
                },
            ],
            None,
        );
        match locate(&embedded, &r) {
            Some(Found::Inline { name, bytes, block }) => {
                assert_eq!(
                    (name.as_str(), bytes.as_slice(), block),
                    ("image.png", &b"PNG"[..], 1)
                );
            }
            _ => panic!("the image is found"),
        }
    }
}
