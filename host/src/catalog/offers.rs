//! Resources, resource templates and prompts in the catalog, with what
//! serves each (a component, a `[[resources]]` SQL statement, or an upstream
//! MCP server) and who may see it; and routing `completion/complete`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::db::DbTool;
use crate::upstream::Upstream;
use hangar_config::{Config, Limits};
use hangar_core::call::{CallError, CompletionRef, PromptDef, ResourceDef, TemplateDef};
use hangar_runtime::{Listing, ToolPlugin};

use super::Stages;
use super::stages::Plugins;
use super::uri_template::UriTemplate;

/// What serves a resource, a template or a prompt.
#[derive(Clone)]
pub enum Provider {
    Wasm(Arc<ToolPlugin>),
    /// A `[[resources]]` entry's SQL statement (resources and templates only).
    Sql(Arc<DbTool>),
    /// An upstream MCP server, which is asked for the URI as it gave it
    /// (resources and templates only).
    Upstream(Arc<Upstream>),
}

impl Provider {
    fn is_upstream(&self) -> bool {
        matches!(self, Provider::Upstream(_))
    }
}

/// A resource with a fixed URI.
pub struct CatalogResource {
    pub def: ResourceDef,
    pub provider: Provider,
    pub limits: Limits,
    /// Its auth check and `visible_to` (no mappers or schema).
    pub access: Stages,
}

/// A resource template and the matcher for its URIs.
pub struct CatalogTemplate {
    pub def: TemplateDef,
    pub matcher: UriTemplate,
    pub provider: Provider,
    pub limits: Limits,
    pub access: Stages,
}

pub struct CatalogPrompt {
    pub def: PromptDef,
    pub provider: Provider,
    pub limits: Limits,
    pub access: Stages,
}

/// What a `resources/read` of one URI resolves to.
pub enum ResolvedResource<'a> {
    Fixed(&'a CatalogResource),
    /// The template, and its variables' values in the URI (decoded).
    Templated(&'a CatalogTemplate, Vec<(String, String)>),
}

impl ResolvedResource<'_> {
    pub fn provider(&self) -> &Provider {
        match self {
            ResolvedResource::Fixed(r) => &r.provider,
            ResolvedResource::Templated(t, _) => &t.provider,
        }
    }

    pub fn limits(&self) -> &Limits {
        match self {
            ResolvedResource::Fixed(r) => &r.limits,
            ResolvedResource::Templated(t, _) => &t.limits,
        }
    }

    pub fn access(&self) -> &Stages {
        match self {
            ResolvedResource::Fixed(r) => &r.access,
            ResolvedResource::Templated(t, _) => &t.access,
        }
    }

    /// What lists it: the resource's URI, or the template's URI template.
    pub fn key(&self) -> &str {
        match self {
            ResolvedResource::Fixed(r) => &r.def.uri,
            ResolvedResource::Templated(t, _) => &t.def.uri_template,
        }
    }

    /// The template variables' values in the URI (none for a fixed URI).
    pub fn variables(&self) -> &[(String, String)] {
        match self {
            ResolvedResource::Fixed(_) => &[],
            ResolvedResource::Templated(_, vars) => vars,
        }
    }

    /// MIME type the listing gave, for contents that name none.
    pub fn mime_type(&self) -> Option<&str> {
        match self {
            ResolvedResource::Fixed(r) => r.def.mime_type.as_deref(),
            ResolvedResource::Templated(t, _) => t.def.mime_type.as_deref(),
        }
    }

    /// The listed `_meta`, which each item read under the URI carries too
    /// (an MCP App host reads a view's CSP from the item it renders).
    pub fn meta(&self) -> Option<&hangar_core::call::Meta> {
        match self {
            ResolvedResource::Fixed(r) => r.def.meta.as_ref(),
            ResolvedResource::Templated(t, _) => t.def.meta.as_ref(),
        }
    }
}

/// Everything offered besides tools, in listing order. Entries are shared
/// with the catalogs an upstream refresh derives (see [`Offered::local`]).
#[derive(Default)]
pub struct Offered {
    pub resources: Vec<Arc<CatalogResource>>,
    by_uri: HashMap<String, usize>,
    pub templates: Vec<Arc<CatalogTemplate>>,
    pub prompts: Vec<Arc<CatalogPrompt>>,
    by_prompt: HashMap<String, usize>,
}

impl Offered {
    /// Adds what `plugin` listed, each with its `[[resources]]` /
    /// `[[prompts]]` settings; returns what could not be added.
    pub(super) fn add_listing(
        &mut self,
        config: &Config,
        plugins: &Plugins,
        plugin: &Arc<ToolPlugin>,
        listing: Listing,
    ) -> Vec<String> {
        let provider = Provider::Wasm(plugin.clone());
        let base = config.limits_for(plugin.name(), "");
        let mut errors = self.add_resources_of(
            config,
            plugins,
            &provider,
            base,
            listing.resources,
            listing.templates,
        );
        errors.extend(self.add_prompts_of(config, plugins, &provider, base, listing.prompts));
        errors
    }

    /// Adds the prompts one source offers, each with its `[[prompts]]`
    /// auth, `visible_to` and limits (over `base`); returns why each left
    /// out was.
    pub(super) fn add_prompts_of(
        &mut self,
        config: &Config,
        plugins: &Plugins,
        provider: &Provider,
        base: Limits,
        prompts: impl IntoIterator<Item = PromptDef>,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        for def in prompts {
            let cfg = config.prompt(&def.name);
            let added = plugins
                .access(
                    config,
                    &format!("prompt {}", def.name),
                    cfg.and_then(|c| c.auth.as_ref()),
                    cfg.and_then(|c| c.visible_to.as_ref()),
                )
                .and_then(|access| {
                    self.add_prompt(CatalogPrompt {
                        def,
                        provider: provider.clone(),
                        limits: cfg.map_or(base, |c| base.overridden_by(&c.limits)),
                        access,
                    })
                });
            errors.extend(added.err());
        }
        errors
    }

    /// What components and `[[resources]]` statements offer, without the
    /// upstreams' entries: what a catalog derived after an upstream's lists
    /// changed starts from (the entries shared, not made again).
    pub(super) fn local(&self) -> Offered {
        let mut local = Offered::default();
        for r in self.resources.iter().filter(|r| !r.provider.is_upstream()) {
            local.push_resource(r.clone());
        }
        local.templates = (self.templates.iter())
            .filter(|t| !t.provider.is_upstream())
            .cloned()
            .collect();
        for p in self.prompts.iter().filter(|p| !p.provider.is_upstream()) {
            local.push_prompt(p.clone());
        }
        local
    }

    /// Adds the resources and templates one source (`provider`) offers,
    /// each with its `[[resources]]` auth, `visible_to` and limits (over
    /// `base`, the source's own); returns why each left out was.
    pub(super) fn add_resources_of(
        &mut self,
        config: &Config,
        plugins: &Plugins,
        provider: &Provider,
        base: Limits,
        resources: impl IntoIterator<Item = ResourceDef>,
        templates: impl IntoIterator<Item = TemplateDef>,
    ) -> Vec<String> {
        let access = |key: &str| {
            let cfg = config.resource(key);
            let access = plugins.access(
                config,
                &format!("resource {key}"),
                cfg.and_then(|c| c.auth.as_ref()),
                cfg.and_then(|c| c.visible_to.as_ref()),
            )?;
            let limits = cfg.map_or(base, |c| base.overridden_by(&c.limits));
            Ok::<_, String>((access, limits))
        };
        let mut errors = Vec::new();
        for def in resources {
            let added = access(&def.uri).and_then(|(access, limits)| {
                self.add_resource(CatalogResource {
                    def,
                    provider: provider.clone(),
                    limits,
                    access,
                })
            });
            errors.extend(added.err());
        }
        for def in templates {
            let added = UriTemplate::parse(&def.uri_template).and_then(|matcher| {
                let (access, limits) = access(&def.uri_template)?;
                self.add_template(CatalogTemplate {
                    def,
                    matcher,
                    provider: provider.clone(),
                    limits,
                    access,
                })
            });
            errors.extend(added.err());
        }
        errors
    }

    pub fn add_resource(&mut self, r: CatalogResource) -> Result<(), String> {
        if self.by_uri.contains_key(&r.def.uri) {
            return Err(format!(
                "resource {:?} is offered twice: the first source keeps it",
                r.def.uri
            ));
        }
        self.push_resource(Arc::new(r));
        Ok(())
    }

    fn push_resource(&mut self, r: Arc<CatalogResource>) {
        self.by_uri.insert(r.def.uri.clone(), self.resources.len());
        self.resources.push(r);
    }

    pub fn add_template(&mut self, t: CatalogTemplate) -> Result<(), String> {
        if self
            .templates
            .iter()
            .any(|o| o.def.uri_template == t.def.uri_template)
        {
            return Err(format!(
                "resource template {:?} is offered twice: the first source keeps it",
                t.def.uri_template
            ));
        }
        self.templates.push(Arc::new(t));
        Ok(())
    }

    pub fn add_prompt(&mut self, p: CatalogPrompt) -> Result<(), String> {
        if self.by_prompt.contains_key(&p.def.name) {
            return Err(format!("prompt {:?} is offered twice", p.def.name));
        }
        self.push_prompt(Arc::new(p));
        Ok(())
    }

    fn push_prompt(&mut self, p: Arc<CatalogPrompt>) {
        self.by_prompt
            .insert(p.def.name.clone(), self.prompts.len());
        self.prompts.push(p);
    }

    /// Whether anything here is shown only to some callers.
    pub fn has_restricted(&self) -> bool {
        let hidden = |s: &Stages| s.visible_to.is_some();
        self.resources.iter().any(|r| hidden(&r.access))
            || self.templates.iter().any(|t| hidden(&t.access))
            || self.prompts.iter().any(|p| hidden(&p.access))
    }

    /// Whether anything here has an auth stage of its own.
    pub fn has_auth(&self) -> bool {
        self.resources.iter().any(|r| r.access.auth.is_some())
            || self.templates.iter().any(|t| t.access.auth.is_some())
            || self.prompts.iter().any(|p| p.access.auth.is_some())
    }

    /// Whether any component or upstream completes arguments (an upstream
    /// that does not answers no values).
    pub fn completes(&self) -> bool {
        let wasm_completes = |p: &Provider| match p {
            Provider::Wasm(plugin) => plugin.completes(),
            Provider::Upstream(_) => true,
            Provider::Sql(_) => false,
        };
        self.prompts.iter().any(|p| wasm_completes(&p.provider))
            || self.templates.iter().any(|t| wasm_completes(&t.provider))
    }

    /// The resource or first template that `uri` names.
    pub fn resolve_resource(&self, uri: &str) -> Result<ResolvedResource<'_>, CallError> {
        if let Some(&i) = self.by_uri.get(uri) {
            return Ok(ResolvedResource::Fixed(&self.resources[i]));
        }
        self.templates
            .iter()
            .find_map(|t| Some(ResolvedResource::Templated(t, t.matcher.matches(uri)?)))
            .ok_or_else(|| CallError::resource_not_found(uri))
    }

    pub fn resolve_prompt(&self, name: &str) -> Result<&CatalogPrompt, CallError> {
        self.by_prompt
            .get(name)
            .map(|&i| &*self.prompts[i])
            .ok_or_else(|| CallError::prompt_not_found(name))
    }

    /// The component that completes arguments of `reference`, and who may see it.
    pub fn completer(&self, reference: &CompletionRef) -> Option<(&Provider, &Limits, &Stages)> {
        match reference {
            CompletionRef::Prompt(name) => {
                let p = &self.prompts[*self.by_prompt.get(name)?];
                Some((&p.provider, &p.limits, &p.access))
            }
            CompletionRef::ResourceTemplate(template) => self
                .templates
                .iter()
                .find(|t| &t.def.uri_template == template)
                .map(|t| (&t.provider, &t.limits, &t.access)),
        }
    }
}
