//! Resources, prompts and completions a `server`-world component offers,
//! and the `_meta` an `app`-world one gives its tools and resources:
//! which of the interfaces it exports, and running them under the same
//! limits, slots and deadlines as tool calls.

use std::time::Instant;

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::bindings::app::exports::hangar::plugin::{completion, prompts, resources};
use super::bindings::tool::hangar::plugin::types as wit;
use super::convert::{content, wit_context};
use super::guest_state::Caller;
use super::limits;
use super::tool::{Instance, ToolPlugin};
use hangar_config::Limits;
use hangar_core::call::apps::{MetaOf, parse_meta};
use hangar_core::call::{
    CallContext, CallError, CompletionRef, Completions, ErrorKind, Meta, PromptArgument, PromptDef,
    PromptMessage, PromptResult, ResourceContents, ResourceDef, Role, Stage, TemplateDef,
};

/// What a component lists besides tools, asked once at load.
#[derive(Debug, Default)]
pub struct Listing {
    pub resources: Vec<ResourceDef>,
    pub templates: Vec<TemplateDef>,
    pub prompts: Vec<PromptDef>,
    pub completes: bool,
    /// The `_meta` of tools, by the name the component gives them (from
    /// its `meta` export; its resources' `_meta` is on their definitions).
    pub tool_meta: HashMap<String, Meta>,
    /// Each `_meta` the component declared that was refused, and why: the
    /// rest of the component loads without it.
    pub meta_problems: Vec<String>,
}

impl Listing {
    /// Checks each `_meta` the `meta` export declared and puts it where it
    /// belongs: a resource's or template's on its definition, a tool's in
    /// [`Listing::tool_meta`]. One that is refused, or names a resource the
    /// component does not list, is a problem and is left out.
    fn attach_meta(&mut self, tools: Vec<(String, String)>, resources: Vec<(String, String)>) {
        for (name, text) in tools {
            match parse_meta(&text, MetaOf::Tool) {
                Ok(meta) => {
                    self.tool_meta.insert(name, meta);
                }
                Err(e) => self.meta_problems.push(format!("tool {name:?}: {e}")),
            }
        }
        for (uri, text) in resources {
            let meta = match parse_meta(&text, MetaOf::Resource) {
                Ok(meta) => meta,
                Err(e) => {
                    self.meta_problems.push(format!("resource {uri:?}: {e}"));
                    continue;
                }
            };
            if let Some(r) = self.resources.iter_mut().find(|r| r.uri == uri) {
                r.meta = Some(meta);
            } else if let Some(t) = self.templates.iter_mut().find(|t| t.uri_template == uri) {
                t.meta = Some(meta);
            } else {
                self.meta_problems.push(format!(
                    "resource {uri:?}: _meta for a resource the component does not list"
                ));
            }
        }
    }
}

fn missing(what: &str) -> wasmtime::Error {
    wasmtime::format_err!("the component does not export {what}")
}

impl ToolPlugin {
    /// Whether the component exports `completion`.
    pub fn completes(&self) -> bool {
        self.offers.completion.is_some()
    }

    /// Runs one export call on a fresh instance under the call's deadline
    /// and cancellation, then logs the guest's stderr and turns a trap,
    /// fuel or memory exhaustion into a [`CallError`].
    async fn run<T>(
        &self,
        limits: &Limits,
        cx: &CallContext,
        export: impl AsyncFnOnce(&mut Instance) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        let until = Instant::now() + limits.queue_timeout;
        let cancel = &cx.cancel;
        let mut inst = self
            .instantiate(limits, cancel, cx.events.clone(), Caller::of(cx), until)
            .await?;
        let deadline = inst.store.data().deadline;
        let out = limits::bounded(
            &self.sched,
            deadline,
            limits,
            cancel,
            Stage::Handler,
            export(&mut inst),
        )
        .await;
        limits::log_stderr(&inst.store);
        limits::settle(out, &inst.store, Stage::Handler, limits, cancel)
    }

    /// Lists the component's resources, templates and prompts (at load).
    pub async fn list_offers(&self, limits: &Limits) -> Result<Listing, CallError> {
        let mut listing = Listing {
            completes: self.offers.completion.is_some(),
            ..Listing::default()
        };
        let offers = &self.offers;
        if offers.resources.is_none() && offers.prompts.is_none() && offers.meta.is_none() {
            return Ok(listing);
        }
        let cx = CallContext::default();
        let (resources, templates, prompts, (tool_meta, resource_meta)) = self
            .run(limits, &cx, async |inst| {
                let mut lists = (Vec::new(), Vec::new(), Vec::new(), (Vec::new(), Vec::new()));
                if let Some(idx) = &self.offers.resources {
                    let guest = idx.load(&mut inst.store, &inst.instance)?;
                    lists.0 = guest.call_list_resources(&mut inst.store).await?;
                    lists.1 = guest.call_list_templates(&mut inst.store).await?;
                }
                if let Some(idx) = &self.offers.prompts {
                    let guest = idx.load(&mut inst.store, &inst.instance)?;
                    lists.2 = guest.call_list_prompts(&mut inst.store).await?;
                }
                if let Some(idx) = &self.offers.meta {
                    let guest = idx.load(&mut inst.store, &inst.instance)?;
                    lists.3.0 = guest.call_tool_meta(&mut inst.store).await?;
                    lists.3.1 = guest.call_resource_meta(&mut inst.store).await?;
                }
                Ok(lists)
            })
            .await?;
        listing.resources = resources.into_iter().map(resource_def).collect();
        listing.templates = templates.into_iter().map(template_def).collect();
        listing.prompts = prompts.into_iter().map(prompt_def).collect();
        listing.attach_meta(tool_meta, resource_meta);
        Ok(listing)
    }

    /// Reads `uri`; a `not-found` answer is a [`ErrorKind::NotFound`].
    pub async fn read_resource(
        &self,
        cx: &CallContext,
        uri: &str,
        limits: &Limits,
    ) -> Result<Vec<ResourceContents>, CallError> {
        let wit_cx = wit_context(cx);
        let items = self
            .run(limits, cx, async |inst| {
                let idx = self.offers.resources.as_ref();
                let guest = idx.ok_or_else(|| missing("resources"))?;
                let guest = guest.load(&mut inst.store, &inst.instance)?;
                guest.call_read(&mut inst.store, &wit_cx, uri).await
            })
            .await?
            .map_err(|e| match e {
                resources::ResourceError::NotFound(m) => {
                    CallError::new(Stage::Handler, ErrorKind::NotFound, m)
                }
                resources::ResourceError::Failed(m) => {
                    CallError::new(Stage::Handler, ErrorKind::Failed, m)
                }
            })?;
        let bytes: usize = items
            .iter()
            .map(|i| {
                i.uri.len()
                    + match &i.contents {
                        wit::ResourceContents::Text(t) => t.len(),
                        wit::ResourceContents::Blob(b) => b.len(),
                    }
            })
            .sum();
        super::tool::output_within(bytes, limits, Stage::Handler)?;
        Ok(items.into_iter().map(resource_contents).collect())
    }

    /// Renders the prompt `name` with `arguments` (string values).
    pub async fn get_prompt(
        &self,
        cx: &CallContext,
        name: &str,
        arguments: &Map<String, Value>,
        limits: &Limits,
    ) -> Result<PromptResult, CallError> {
        let args: Vec<(String, String)> = arguments
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), str::to_string),
                )
            })
            .collect();
        let wit_cx = wit_context(cx);
        let result = self
            .run(limits, cx, async |inst| {
                let idx = self.offers.prompts.as_ref();
                let guest = idx.ok_or_else(|| missing("prompts"))?;
                let guest = guest.load(&mut inst.store, &inst.instance)?;
                let call = guest.call_get_prompt(&mut inst.store, &wit_cx, name, &args);
                call.await
            })
            .await?
            .map_err(|e| match e {
                prompts::PromptError::InvalidArguments(m) => {
                    CallError::new(Stage::Handler, ErrorKind::Invalid, m)
                }
                prompts::PromptError::Failed(m) => {
                    CallError::new(Stage::Handler, ErrorKind::Failed, m)
                }
            })?;
        Ok(PromptResult {
            description: result.description,
            messages: result
                .messages
                .into_iter()
                .map(|m| PromptMessage {
                    role: role(m.role),
                    content: content(m.content),
                })
                .collect(),
        })
    }

    /// Suggests values for an argument of one of the component's prompts or templates.
    pub async fn complete(
        &self,
        cx: &CallContext,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: &Map<String, Value>,
        limits: &Limits,
    ) -> Result<Completions, CallError> {
        let Some(idx) = &self.offers.completion else {
            return Ok(Completions::default());
        };
        let request = completion::CompletionRequest {
            reference: match reference {
                CompletionRef::Prompt(n) => completion::Reference::Prompt(n.clone()),
                CompletionRef::ResourceTemplate(t) => {
                    completion::Reference::ResourceTemplate(t.clone())
                }
            },
            argument: argument.to_string(),
            value: value.to_string(),
            context: context
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect(),
        };
        let c = self
            .run(limits, cx, async |inst| {
                let guest = idx.load(&mut inst.store, &inst.instance)?;
                guest.call_complete(&mut inst.store, &request).await
            })
            .await?;
        Ok(Completions {
            values: c.values,
            total: c.total,
            has_more: c.has_more,
        }
        .capped())
    }
}

fn role(r: wit::Role) -> Role {
    match r {
        wit::Role::User => Role::User,
        wit::Role::Assistant => Role::Assistant,
    }
}

fn resource_def(d: resources::ResourceDefinition) -> ResourceDef {
    ResourceDef {
        uri: d.uri,
        name: d.name,
        title: d.title,
        description: d.description,
        mime_type: d.mime_type,
        size: d.size,
        meta: None,
    }
}

fn template_def(d: resources::ResourceTemplate) -> TemplateDef {
    TemplateDef {
        uri_template: d.uri_template,
        name: d.name,
        title: d.title,
        description: d.description,
        mime_type: d.mime_type,
        meta: None,
    }
}

fn prompt_def(d: prompts::PromptDefinition) -> PromptDef {
    PromptDef {
        name: d.name,
        title: d.title,
        description: d.description,
        arguments: d
            .arguments
            .into_iter()
            .map(|a| PromptArgument {
                name: a.name,
                title: a.title,
                description: a.description,
                required: a.required,
            })
            .collect(),
    }
}

fn resource_contents(item: resources::ResourceItem) -> ResourceContents {
    use base64::Engine as _;
    let (text, blob) = match item.contents {
        wit::ResourceContents::Text(t) => (Some(t), None),
        wit::ResourceContents::Blob(b) => (
            None,
            Some(base64::engine::general_purpose::STANDARD.encode(&b)),
        ),
    };
    ResourceContents {
        uri: item.uri,
        mime_type: item.mime_type,
        text,
        blob,
        meta: None,
    }
}
