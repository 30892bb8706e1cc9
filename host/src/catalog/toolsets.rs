//! The toolsets of `[toolsets]` as the catalog applies them: for each, the
//! globs over tool names, resource URIs and prompt names, and the
//! [`Scope`] one request sees. Lookups and listings ask the scope, so what
//! is outside a toolset answers exactly as what does not exist.

use std::collections::BTreeMap;

use super::glob::glob_match;
use super::stages::AuthStage;
use hangar_config::{AuthConfig, CatalogMode, ToolsetConfig};
use hangar_core::call::{Principal, Toolset};

/// Every toolset, by name (the catalog's: a reload brings new globs).
#[derive(Default)]
pub struct Toolsets {
    by_name: BTreeMap<String, Globs>,
}

/// One toolset's globs, and its auth check.
#[derive(Default)]
pub struct Globs {
    tools: Vec<String>,
    resources: Vec<String>,
    prompts: Vec<String>,
    auth: Option<AuthStage>,
    /// `[toolsets.NAME] catalog`: what its endpoints list, if not the server's.
    catalog: Option<CatalogMode>,
}

/// A toolset that is not (any more) configured: it holds nothing.
static NOTHING: Globs = Globs {
    tools: Vec::new(),
    resources: Vec::new(),
    prompts: Vec::new(),
    auth: None,
    catalog: None,
};

/// What one request may reach: the whole catalog, or one toolset's part.
#[derive(Clone, Copy)]
pub struct Scope<'a>(Option<&'a Globs>);

impl<'a> Scope<'a> {
    /// The whole catalog.
    pub const ALL: Scope<'static> = Scope(None);

    pub fn tool(&self, name: &str) -> bool {
        self.0.is_none_or(|g| any(&g.tools, name))
    }

    /// A resource's URI or a template's URI template.
    pub fn resource(&self, uri: &str) -> bool {
        self.0.is_none_or(|g| any(&g.resources, uri))
    }

    pub fn prompt(&self, name: &str) -> bool {
        self.0.is_none_or(|g| any(&g.prompts, name))
    }

    /// The toolset's own auth check (`[toolsets.NAME] auth`), if any.
    pub fn auth(self) -> Option<&'a AuthStage> {
        self.0.and_then(|g| g.auth.as_ref())
    }

    /// The toolset's own catalog mode (`[toolsets.NAME] catalog`), if set.
    pub fn mode(self) -> Option<CatalogMode> {
        self.0.and_then(|g| g.catalog)
    }

    /// Whether a listing for `principal` (the one the toolset's auth check
    /// accepted, when it has one) shows anything: a caller the check
    /// refused is shown nothing.
    pub fn admits(&self, principal: Option<&Principal>) -> bool {
        self.auth().is_none() || principal.is_some()
    }
}

fn any(globs: &[String], text: &str) -> bool {
    globs.iter().any(|g| glob_match(g, text))
}

impl Toolsets {
    /// The toolsets of `config`; `auth` makes a toolset's auth stage (an
    /// error when its plugin did not load).
    pub fn new(
        config: &BTreeMap<String, ToolsetConfig>,
        auth: impl Fn(&str, &AuthConfig) -> Result<AuthStage, String>,
    ) -> Result<Toolsets, String> {
        let mut by_name = BTreeMap::new();
        for (name, t) in config {
            let what = format!("[toolsets.{name}] auth");
            let globs = Globs {
                tools: t.tools.clone(),
                resources: t.resources.clone(),
                prompts: t.prompts.clone(),
                auth: t.auth.as_ref().map(|a| auth(&what, a)).transpose()?,
                catalog: t.catalog,
            };
            by_name.insert(name.clone(), globs);
        }
        Ok(Toolsets { by_name })
    }

    /// The scope of a request through `toolset` (`None`: the whole catalog).
    pub fn scope(&self, toolset: Option<&Toolset>) -> Scope<'_> {
        match toolset {
            None => Scope::ALL,
            Some(t) => Scope(Some(self.by_name.get(t.name()).unwrap_or(&NOTHING))),
        }
    }

    /// The toolsets' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// One line per glob that matches nothing in `names` (tool names,
    /// resource URIs and templates, prompt names), for `hangar check` and
    /// `/healthz`.
    pub fn unmatched<'a>(
        &self,
        tools: &[&'a str],
        resources: &[&'a str],
        prompts: &[&'a str],
    ) -> Vec<String> {
        let mut lines = Vec::new();
        for (name, globs) in &self.by_name {
            for (key, list, names) in [
                ("tools", &globs.tools, tools),
                ("resources", &globs.resources, resources),
                ("prompts", &globs.prompts, prompts),
            ] {
                for glob in list
                    .iter()
                    .filter(|g| !names.iter().any(|n| glob_match(g, n)))
                {
                    lines.push(format!(
                        "[toolsets.{name}] {key}: {glob:?} matches nothing in the catalog"
                    ));
                }
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toolsets() -> Toolsets {
        let config: BTreeMap<String, ToolsetConfig> = toml::from_str(
            "[db]\ntools = [\"db.*\", \"weather.get\"]\n[docs]\nresources = [\"demo://*\"]\nprompts = [\"greet\"]\n",
        )
        .unwrap();
        Toolsets::new(&config, |_, _| Err("no auth here".into())).unwrap()
    }

    #[test]
    fn a_scope_holds_what_its_globs_match() {
        let t = toolsets();
        let db = t.scope(Some(&Toolset::new("db")));
        assert!(db.tool("db.query") && db.tool("weather.get"));
        assert!(!db.tool("weather.set") && !db.resource("demo://a") && !db.prompt("greet"));
        let docs = t.scope(Some(&Toolset::new("docs")));
        assert!(!docs.tool("db.query") && docs.resource("demo://a") && docs.prompt("greet"));
        let gone = t.scope(Some(&Toolset::new("gone")));
        assert!(!gone.tool("db.query") && !gone.resource("demo://a") && !gone.prompt("greet"));
        let all = t.scope(None);
        assert!(all.tool("x") && all.resource("y") && all.prompt("z"));
    }

    #[test]
    fn globs_that_match_nothing_are_named() {
        let lines = toolsets().unmatched(&["db.query"], &["demo://a"], &[]);
        assert_eq!(
            lines,
            [
                "[toolsets.db] tools: \"weather.get\" matches nothing in the catalog",
                "[toolsets.docs] prompts: \"greet\" matches nothing in the catalog",
            ]
        );
    }
}
