//! The pipeline for what is offered besides tools: resolve → auth (and
//! visibility) → execute, for `resources/read`, `prompts/get` and
//! `completion/complete`, and the per-caller listings.

use serde_json::{Map, Value};

use super::{Pipeline, not_cancelled};
use crate::catalog::{Provider, ResolvedResource, Stages};
use hangar_core::call::{
    CallContext, CallError, CompletionRef, Completions, ErrorKind, Principal, PromptDef,
    PromptResult, ReadResult, ResourceDef, Stage, TemplateDef, Toolset,
};

impl Pipeline {
    /// The resources a caller with `principal` sees through `toolset`, in order.
    pub fn listed_resources(
        &self,
        principal: Option<&Principal>,
        toolset: Option<&Toolset>,
    ) -> Vec<&ResourceDef> {
        let (offered, scope) = (self.catalog.offered(), self.catalog.scope(toolset));
        if !scope.admits(principal) {
            return Vec::new();
        }
        let code = super::meta::offers_run(&self.catalog, toolset).then(super::code::tools_dts);
        (offered.resources.iter())
            .filter(|r| r.access.visible(principal) && scope.resource(&r.def.uri))
            .map(|r| &r.def)
            .chain(code)
            .collect()
    }

    pub fn listed_templates(
        &self,
        principal: Option<&Principal>,
        toolset: Option<&Toolset>,
    ) -> Vec<&TemplateDef> {
        let (offered, scope) = (self.catalog.offered(), self.catalog.scope(toolset));
        if !scope.admits(principal) {
            return Vec::new();
        }
        offered
            .templates
            .iter()
            .filter(|t| t.access.visible(principal) && scope.resource(&t.def.uri_template))
            .map(|t| &t.def)
            .collect()
    }

    pub fn listed_prompts(
        &self,
        principal: Option<&Principal>,
        toolset: Option<&Toolset>,
    ) -> Vec<&PromptDef> {
        let (offered, scope) = (self.catalog.offered(), self.catalog.scope(toolset));
        if !scope.admits(principal) {
            return Vec::new();
        }
        offered
            .prompts
            .iter()
            .filter(|p| p.access.visible(principal) && scope.prompt(&p.def.name))
            .map(|p| &p.def)
            .collect()
    }

    /// The resource or template `uri` names, as a request through the
    /// context's toolset finds it: one outside the toolset (neither its URI
    /// nor what lists it matches) is not found, as an unknown one.
    fn resolve_resource<'a>(
        &'a self,
        uri: &str,
        cx: &CallContext,
    ) -> Result<ResolvedResource<'a>, CallError> {
        let resolved = self.catalog.offered().resolve_resource(uri)?;
        let scope = self.catalog.scope(cx.toolset.as_ref());
        if !scope.resource(uri) && !scope.resource(resolved.key()) {
            return Err(CallError::resource_not_found(uri));
        }
        Ok(resolved)
    }

    /// Reads one resource: the listed one with this URI, or the first
    /// template it matches.
    pub async fn read_resource(
        &self,
        uri: &str,
        cx: &mut CallContext,
    ) -> Result<ReadResult, CallError> {
        if super::files::is_artifact(uri) {
            not_cancelled(cx, Stage::Handler)?;
            return self.read_artifact(uri, cx).await;
        }
        if uri == super::code::TOOLS_DTS
            && super::meta::offers_run(&self.catalog, cx.toolset.as_ref())
        {
            return Ok(self.read_tools_dts(cx).await);
        }
        let resolved = self.resolve_resource(uri, cx)?;
        self.admit(uri, resolved.access(), cx, || {
            CallError::resource_not_found(uri)
        })
        .await?;
        not_cancelled(cx, Stage::Handler)?;
        let (mut contents, meta) = match resolved.provider() {
            Provider::Wasm(plugin) => (
                plugin.read_resource(cx, uri, resolved.limits()).await?,
                None,
            ),
            Provider::Sql(db) => (
                db.read_resource(uri, resolved.variables(), cx.principal.as_ref(), &cx.cancel)
                    .await?,
                None,
            ),
            // The upstream is asked for the URI as it listed it; its answer
            // (the contents' and the result's `_meta` too) passes through.
            Provider::Upstream(upstream) => {
                let read = upstream.read(uri, cx).await?;
                (read.contents, read.meta)
            }
        };
        if let Some(mime) = resolved.mime_type() {
            for c in contents.iter_mut().filter(|c| c.mime_type.is_none()) {
                c.mime_type = Some(mime.to_string());
            }
        }
        // A component's or DB entry's listed `_meta` goes on its own item
        // too (MCP Apps hosts read the view's `ui` there); an upstream's
        // answer is left as it gave it.
        let upstream = matches!(resolved.provider(), Provider::Upstream(_));
        if let Some(listed) = resolved.meta().filter(|_| !upstream) {
            let own = contents
                .iter_mut()
                .filter(|c| c.meta.is_none() && c.uri == uri);
            for c in own {
                c.meta = Some(listed.clone());
            }
        }
        Ok(ReadResult { contents, meta })
    }

    /// Whether the caller may watch `uri` (`resources/subscribe`): what
    /// could be read, passing its auth check and `visible_to` — without
    /// reading it. One hidden from the caller answers exactly as one that
    /// does not exist.
    ///
    /// An upstream's resource is watched at the upstream too: Hangar
    /// subscribes to it there (once per URI), and its updates reach the
    /// sessions subscribed here.
    pub async fn watchable(&self, uri: &str, cx: &mut CallContext) -> Result<(), CallError> {
        let resolved = self.resolve_resource(uri, cx)?;
        self.admit(uri, resolved.access(), cx, || {
            CallError::resource_not_found(uri)
        })
        .await?;
        if let Provider::Upstream(upstream) = resolved.provider() {
            upstream.watch(uri).await?;
        }
        Ok(())
    }

    /// Renders a prompt; a required argument that is missing is refused
    /// before the component runs.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        cx: &mut CallContext,
    ) -> Result<PromptResult, CallError> {
        if !self.catalog.scope(cx.toolset.as_ref()).prompt(name) {
            return Err(CallError::prompt_not_found(name));
        }
        let prompt = self.catalog.offered().resolve_prompt(name)?;
        self.admit(name, &prompt.access, cx, || {
            CallError::prompt_not_found(name)
        })
        .await?;
        // Its definition changed under the session (`pinning = "block"`).
        if let Some(pins) = &cx.pins
            && let Some(refused) =
                hangar_core::call::pins::refusal(pins, self.catalog.pinning(), &prompt.def)
        {
            tracing::warn!(prompt = name, session = ?cx.session_id, "prompts/get refused: {}", refused.message);
            return Err(refused);
        }
        not_cancelled(cx, Stage::Validate)?;
        for arg in prompt.def.arguments.iter().filter(|a| a.required) {
            if !arguments.contains_key(&arg.name) {
                return Err(CallError::new(
                    Stage::Validate,
                    ErrorKind::Invalid,
                    format!("missing required argument {:?}", arg.name),
                ));
            }
        }
        if let Some((key, _)) = arguments.iter().find(|(_, v)| !v.is_string()) {
            return Err(CallError::new(
                Stage::Validate,
                ErrorKind::Invalid,
                format!("argument {key:?} must be a string"),
            ));
        }
        not_cancelled(cx, Stage::Handler)?;
        match &prompt.provider {
            Provider::Wasm(plugin) => plugin.get_prompt(cx, name, arguments, &prompt.limits).await,
            Provider::Upstream(upstream) => upstream.get_prompt(name, arguments, cx).await,
            // Statements serve resources only; no prompt is built on one.
            Provider::Sql(_) => Err(CallError::prompt_not_found(name)),
        }
    }

    /// Suggestions for an argument of a prompt or a resource template. An
    /// unknown (or hidden) reference is not found; one whose component does
    /// not complete answers no values.
    pub async fn complete(
        &self,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: &Map<String, Value>,
        cx: &mut CallContext,
    ) -> Result<Completions, CallError> {
        let not_found = || match reference {
            CompletionRef::Prompt(n) => CallError::prompt_not_found(n),
            CompletionRef::ResourceTemplate(t) => CallError::resource_not_found(t),
        };
        let scope = self.catalog.scope(cx.toolset.as_ref());
        let in_scope = match reference {
            CompletionRef::Prompt(n) => scope.prompt(n),
            CompletionRef::ResourceTemplate(t) => scope.resource(t),
        };
        if !in_scope {
            return Err(not_found());
        }
        let Some((provider, limits, access)) = self.catalog.offered().completer(reference) else {
            return Err(not_found());
        };
        let what = match reference {
            CompletionRef::Prompt(n) | CompletionRef::ResourceTemplate(n) => n.as_str(),
        };
        self.admit(what, access, cx, not_found).await?;
        not_cancelled(cx, Stage::Handler)?;
        match provider {
            Provider::Wasm(plugin) => {
                plugin
                    .complete(cx, reference, argument, value, context, limits)
                    .await
            }
            Provider::Upstream(upstream) => {
                (upstream.complete(reference, argument, value, context, cx)).await
            }
            // A DB template suggests nothing.
            Provider::Sql(_) => Ok(Completions::default()),
        }
    }

    /// The auth check and visibility of a resource or prompt: one hidden
    /// from the caller answers exactly as one that does not exist.
    async fn admit(
        &self,
        what: &str,
        access: &Stages,
        cx: &mut CallContext,
        not_found: impl Fn() -> CallError,
    ) -> Result<(), CallError> {
        not_cancelled(cx, Stage::Auth)?;
        // A toolset's own auth check (`[toolsets.NAME] auth`) comes first.
        if let Some(gate) = self.catalog.scope(cx.toolset.as_ref()).auth() {
            cx.principal = Some(self.door.check(gate, what, cx).await?);
        }
        let hidden = access.visible_to.is_some();
        let default_auth = if hidden {
            self.catalog.default_auth()
        } else {
            None
        };
        if let Some(auth) = access.auth.as_ref().or(default_auth) {
            match self.door.check(auth, what, cx).await {
                Ok(principal) => cx.principal = Some(principal),
                Err(e) if hidden && e.kind == ErrorKind::Unauthorized => return Err(not_found()),
                Err(e) => return Err(e),
            }
        }
        if !access.visible(cx.principal.as_ref()) {
            return Err(not_found());
        }
        Ok(())
    }
}
