//! What an upstream's adapters add to the catalog (`[upstreams.NAME.adapters]`):
//! the `NAME_get_upload_url` tool that tells a client where to upload for
//! its `upload_consumer` tools, and the `adapter_wiring_incomplete` problem
//! of adapters whose tool the upstream does not list.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::upload_url::{UPLOAD_URL_SUFFIX, UploadUrl};
use super::{Backend, Catalog, CatalogTool, RateLimits, ToolDef, tool_limiter};
use crate::upstream::Upstream;
use hangar_config::{AdapterKind, Config};
use hangar_core::call::Annotations;
use hangar_runtime::LoadFailure;

impl Catalog {
    /// The `adapter_wiring_incomplete` problem of `upstream`, and its
    /// upload helper tool when one of its listed tools takes uploads.
    pub(super) fn add_adapter_entries(
        &mut self,
        config: &Config,
        upstream: &Arc<Upstream>,
        path: &Path,
        problems: &mut Vec<LoadFailure>,
    ) {
        let unwired = upstream.unwired_adapters();
        if !unwired.is_empty() {
            problems.push(LoadFailure {
                path: path.to_path_buf(),
                error: format!(
                    "adapter_wiring_incomplete: adapters for tools the upstream does not list: {}",
                    unwired.join(", ")
                ),
            });
        }
        if !upstream.consumes_uploads() {
            return;
        }
        match self.upload_url_entry(config, upstream, path) {
            Ok(tool) => {
                if let Err(e) = self.insert_shared(Arc::new(tool)) {
                    problems.push(LoadFailure {
                        path: path.to_path_buf(),
                        error: e.to_string(),
                    });
                }
            }
            Err(error) => problems.push(LoadFailure {
                path: path.to_path_buf(),
                error,
            }),
        }
    }

    fn upload_url_entry(
        &self,
        config: &Config,
        upstream: &Arc<Upstream>,
        path: &Path,
    ) -> Result<CatalogTool, String> {
        let name = format!("{}{UPLOAD_URL_SUFFIX}", upstream.name);
        let mut consumers = Vec::new();
        for (remote, def) in upstream.tools().iter() {
            if let Some(a) = upstream.adapter(remote)
                && a.kind == AdapterKind::UploadConsumer
            {
                consumers.push(format!("{}: {}", def.name, a.arguments.join(", ")));
            }
        }
        let def = ToolDef {
            name: name.clone(),
            title: Some(format!("Where to upload files for {}", upstream.name)),
            description: format!(
                "Tells where to upload a file ({}) before calling a tool of {} that takes an upload:// handle: the URL, the header to send, how long an upload is kept, and a curl example.",
                "multipart POST", upstream.name
            ),
            input_schema: json!({ "type": "object", "properties": {} }),
            output_schema: None,
            annotations: Some(Annotations {
                read_only_hint: Some(true),
                destructive_hint: Some(false),
                idempotent_hint: Some(true),
                open_world_hint: Some(false),
            }),
            meta: None,
        };
        let stages = self.plugins.stages_for(config, &def)?;
        let public_url = (config.artifacts.public_url.as_deref())
            .or(config.server.public_url.as_deref())
            .map(|u| u.trim_end_matches('/').to_string());
        Ok(CatalogTool {
            backend: Backend::UploadUrl(Arc::new(UploadUrl {
                consumers,
                public_url,
                ttl: config.uploads.ttl,
                max_file_bytes: config.uploads.max_file_bytes,
            })),
            limits: config.limits_for("", &name),
            source: path.to_path_buf(),
            stages,
            rate: RateLimits::new([
                tool_limiter(config, &name, self.cluster.as_ref()),
                self.server_limiter.clone(),
            ]),
            def,
        })
    }
}
