//! Wiring each tool to its stages: the auth check (its own or the server
//! default), the input and output mappers (by config or by convention), and
//! its compiled input schema.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::{ArgsValidator, OutputCheck};
use hangar_config::{AuthConfig, AuthKeyword, AuthSetting, Config, Limits};
use hangar_core::call::{Principal, ToolDef};
use hangar_runtime::{AuthPlugin, LoadedPlugin, MapperPlugin, PluginKind, ToolPlugin};

/// The auth stage of a tool.
#[derive(Clone)]
pub struct AuthStage {
    pub plugin: Arc<AuthPlugin>,
    /// The tool's `auth.policy`, as JSON text.
    pub policy: String,
    pub limits: Limits,
}

/// An input or output mapper of a tool.
pub struct MapperStage {
    pub plugin: Arc<MapperPlugin>,
    pub limits: Limits,
}

/// Everything around a tool's execution.
#[derive(Default)]
pub struct Stages {
    pub auth: Option<AuthStage>,
    pub input_map: Option<MapperStage>,
    pub output_map: Option<MapperStage>,
    /// The arguments' check against the tool's `inputSchema` (accepts
    /// anything for resources and prompts, which have no schema).
    pub validator: ArgsValidator,
    /// The presenter's rules for its results: the cut, the undeclared
    /// properties dropped, the check against `outputSchema`.
    pub output: OutputCheck,
    /// Claims a caller needs to see and call the tool; `None`: everyone.
    pub visible_to: Option<BTreeMap<String, Vec<String>>>,
    /// OAuth scopes the caller's token must grant (`[[tools]] scopes`).
    pub scopes: Vec<String>,
    /// `[credentials]` providers the tool needs (`requires` of its
    /// `[[tools]]` entry, plugin or upstream): what `[server]
    /// hide_unconnected` hides it by.
    pub requires: Vec<String>,
    /// Globs of the cached tools and resources a successful call makes stale.
    pub invalidates: Vec<String>,
    /// Arguments that take `upload://` handles: `[[tools]] consumes_uploads`,
    /// and properties of the input schema marked `"x-hangar-upload": true`.
    pub consumes_uploads: Vec<String>,
    /// The call gets a writable `/artifacts` directory: `[[tools]]
    /// produces_artifacts`, or `"x-hangar-artifacts": true` at the top of
    /// the input schema.
    pub produces_artifacts: bool,
}

impl Stages {
    /// The tool's scopes, space-separated, when `principal` lacks one of
    /// them; `None` when it may call.
    pub fn missing_scopes(&self, principal: Option<&Principal>) -> Option<String> {
        let granted = principal.map(granted_scopes).unwrap_or_default();
        self.scopes
            .iter()
            .any(|s| !granted.contains(&s.as_str()))
            .then(|| self.scopes.join(" "))
    }

    /// Adds providers the tool needs (each once).
    pub fn require<'a>(&mut self, more: impl IntoIterator<Item = &'a String>) {
        for name in more {
            if !self.requires.contains(name) {
                self.requires.push(name.clone());
            }
        }
    }

    /// Whether a caller with `principal` may see the tool.
    pub fn visible(&self, principal: Option<&Principal>) -> bool {
        self.visible_to
            .as_ref()
            .is_none_or(|rules| claims_match(rules, principal))
    }
}

/// The providers that resolve to nothing for one caller, whose tools
/// `[server] hide_unconnected` leaves out of its listings (default: none,
/// nothing is hidden). Worked out by the pipeline, which asks the accounts.
#[derive(Default)]
pub struct Unconnected(Option<std::collections::HashSet<String>>);

impl Unconnected {
    pub fn missing(providers: std::collections::HashSet<String>) -> Unconnected {
        Unconnected(Some(providers))
    }

    /// Whether a tool with `stages` is left out.
    pub fn hides(&self, stages: &Stages) -> bool {
        self.0
            .as_ref()
            .is_some_and(|missing| stages.requires.iter().any(|p| missing.contains(p)))
    }
}

/// The arguments of a tool that take upload handles: those its `[[tools]]`
/// entry names, and the properties its schema marks `"x-hangar-upload": true`.
fn consumed_uploads(cfg: Option<&hangar_config::ToolConfig>, schema: &Value) -> Vec<String> {
    let mut names: Vec<String> = cfg.map(|t| t.consumes_uploads.clone()).unwrap_or_default();
    let marked = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, p)| p.get("x-hangar-upload") == Some(&Value::Bool(true)))
        .map(|(name, _)| name.clone());
    for name in marked {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Whether `principal`'s claims satisfy a `visible_to` table: every key
/// must match one listed value (an array claim by any element). No
/// principal matches nothing.
pub fn claims_match(rules: &BTreeMap<String, Vec<String>>, principal: Option<&Principal>) -> bool {
    let Some(claims) = principal.map(|p| &p.claims) else {
        return false;
    };
    rules
        .iter()
        .all(|(claim, allowed)| match claims.get(claim) {
            Some(Value::String(s)) => allowed.contains(s),
            Some(Value::Array(items)) => items
                .iter()
                .any(|v| v.as_str().is_some_and(|s| allowed.iter().any(|a| a == s))),
            _ => false,
        })
}

/// The scopes a principal's token granted: `scope` (space-separated, RFC
/// 9068) and `scp` (a string or an array: Entra ID, Okta).
pub fn granted_scopes(principal: &Principal) -> Vec<&str> {
    let mut granted = Vec::new();
    for claim in ["scope", "scp"] {
        match principal.claims.get(claim) {
            Some(Value::String(s)) => granted.extend(s.split_whitespace()),
            Some(Value::Array(items)) => granted.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    granted
}

/// The auth and mapper plugins that loaded, by name.
#[derive(Default)]
pub struct Plugins {
    auth: HashMap<String, Arc<AuthPlugin>>,
    mappers: HashMap<String, Arc<MapperPlugin>>,
    /// `plugins/mappers/<tool>.input.wasm` and `<tool>.output.wasm`, by file stem.
    by_convention: HashMap<String, Arc<MapperPlugin>>,
}

impl Plugins {
    /// Splits loaded plugins into tool plugins (returned with their paths) and the rest.
    pub fn sort(loaded: Vec<LoadedPlugin>) -> (Plugins, Vec<(PathBuf, ToolPlugin)>) {
        let mut plugins = Plugins {
            auth: HashMap::new(),
            mappers: HashMap::new(),
            by_convention: HashMap::new(),
        };
        let mut tools = Vec::new();
        for p in loaded {
            match p.kind {
                PluginKind::Tool(t) => tools.push((p.path, t)),
                PluginKind::Auth(a) => {
                    plugins.auth.insert(p.name, Arc::new(a));
                }
                PluginKind::Mapper(m) if p.by_convention => {
                    plugins.by_convention.insert(p.name, Arc::new(m));
                }
                PluginKind::Mapper(m) => {
                    plugins.mappers.insert(p.name, Arc::new(m));
                }
            }
        }
        (plugins, tools)
    }

    /// The stages of the tool `def` describes. A stage naming a plugin that
    /// did not load is an error: a tool never runs without the auth check
    /// it was given.
    pub fn stages_for(&self, config: &Config, def: &ToolDef) -> Result<Stages, String> {
        let (name, schema) = (def.name.as_str(), &def.input_schema);
        let tool_cfg = config.tool(name);
        let auth = self.auth_stage(
            config,
            &format!("tool {name}"),
            tool_cfg.and_then(|t| t.auth.as_ref()),
        )?;
        let mappers = tool_cfg.map(|t| &t.mappers);
        let mapper =
            |configured: Option<&String>, suffix: &str| -> Result<Option<MapperStage>, String> {
                let (plugin_name, plugin) = match configured {
                    Some(n) => (
                        n.clone(),
                        self.mappers.get(n).ok_or_else(|| {
                            format!(
                                "tool {name}: mapper plugin {n:?} did not load (or is not a mapper)"
                            )
                        })?,
                    ),
                    None => {
                        let stem = format!("{name}.{suffix}");
                        match self.by_convention.get(&stem) {
                            Some(p) => (stem, p),
                            None => return Ok(None),
                        }
                    }
                };
                Ok(Some(MapperStage {
                    plugin: plugin.clone(),
                    limits: config.limits_for(&plugin_name, ""),
                }))
            };
        let input_map = mapper(mappers.and_then(|m| m.input.as_ref()), "input")?;
        let output_map = mapper(mappers.and_then(|m| m.output.as_ref()), "output")?;
        let validator = ArgsValidator::new(schema).map_err(|e| format!("tool {name}: {e}"))?;
        let output = OutputCheck::new(
            def.output_schema.as_ref(),
            config.server.output_validation,
            (tool_cfg.and_then(|t| t.strip_undeclared)).unwrap_or(config.server.strip_undeclared),
            tool_cfg.and_then(|t| t.limit.clone()),
        )
        .map_err(|e| format!("tool {name}: {e}"))?;
        Ok(Stages {
            auth,
            input_map,
            output_map,
            validator,
            output,
            visible_to: tool_cfg.and_then(|t| t.visible_to.clone()),
            scopes: tool_cfg.map(|t| t.scopes.clone()).unwrap_or_default(),
            requires: tool_cfg.map(|t| t.requires.clone()).unwrap_or_default(),
            invalidates: tool_cfg.map(|t| t.invalidates.clone()).unwrap_or_default(),
            consumes_uploads: consumed_uploads(tool_cfg, schema),
            produces_artifacts: tool_cfg.is_some_and(|t| t.produces_artifacts)
                || schema.get("x-hangar-artifacts") == Some(&Value::Bool(true)),
        })
    }

    /// The auth check of `what` (a tool, resource or prompt): its own
    /// setting, or the server-wide `[auth]`. One naming a plugin that did not
    /// load is an error.
    fn auth_stage(
        &self,
        config: &Config,
        what: &str,
        setting: Option<&AuthSetting>,
    ) -> Result<Option<AuthStage>, String> {
        let auth = match setting {
            Some(AuthSetting::Keyword(AuthKeyword::None)) => None,
            Some(AuthSetting::Plugin(a)) => Some(a),
            None => config.auth.as_ref(),
        };
        let Some(a) = auth else {
            return Ok(None);
        };
        self.auth_of(config, what, a).map(Some)
    }

    /// The auth stage of an `auth = { plugin, policy }` setting at `what`.
    pub fn auth_of(
        &self,
        config: &Config,
        what: &str,
        a: &AuthConfig,
    ) -> Result<AuthStage, String> {
        let plugin = self.auth.get(&a.plugin).ok_or_else(|| {
            format!(
                "{what}: auth plugin {:?} did not load (or is not an auth component)",
                a.plugin
            )
        })?;
        Ok(AuthStage {
            plugin: plugin.clone(),
            policy: Value::Object(a.policy.clone()).to_string(),
            limits: config.limits_for(&a.plugin, ""),
        })
    }

    /// Auth and visibility of a resource or prompt (it has no mappers or schema).
    pub fn access(
        &self,
        config: &Config,
        what: &str,
        setting: Option<&AuthSetting>,
        visible_to: Option<&BTreeMap<String, Vec<String>>>,
    ) -> Result<Stages, String> {
        Ok(Stages {
            auth: self.auth_stage(config, what, setting)?,
            visible_to: visible_to.cloned(),
            ..Stages::default()
        })
    }

    /// The server-wide `[auth]` check, which also tells who is listing the catalog.
    pub fn default_auth(&self, config: &Config) -> Result<Option<AuthStage>, String> {
        let Some(a) = &config.auth else {
            return Ok(None);
        };
        let plugin = self
            .auth
            .get(&a.plugin)
            .ok_or_else(|| format!("[auth]: auth plugin {:?} did not load", a.plugin))?;
        Ok(Some(AuthStage {
            plugin: plugin.clone(),
            policy: Value::Object(a.policy.clone()).to_string(),
            limits: config.limits_for(&a.plugin, ""),
        }))
    }
}
