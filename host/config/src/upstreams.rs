//! `[upstreams.NAME]`: MCP servers (Streamable HTTP at a `url`, or a child
//! process speaking stdio, started from a `command`) whose tools join the
//! catalog, and `[server] pinning`. This file owns the schema and its
//! validation; connecting is the upstream module's job.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::adapters::AdapterConfig;
use super::upstream_auth::{ResolvedAuth, UpstreamAuthConfig};

/// One upstream MCP server.
///
/// ```toml
/// [upstreams.weather]
/// url = "http://127.0.0.1:9100/mcp"
/// prefix = "weather."
/// headers = { authorization = "Bearer {{ env.WEATHER_TOKEN }}" }
/// timeout = "10s"
/// tools = ["forecast", "alerts"]
/// max_response_bytes = 8388608
///
/// [upstreams.files]
/// command = ["uvx", "some-mcp-server"]
/// args = ["--root", "/srv"]
/// env = { API_KEY = "{{ env.FILES_KEY }}" }
/// cwd = "/srv"
/// start = "load"
/// ```
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The server's MCP endpoint (`http://` or `https://`, verified against
    /// the system roots plus `[http] extra_ca`); may hold `{{ env.VAR }}`.
    /// Exactly one of `url` and `command` is set.
    pub url: Option<String>,
    /// A server spoken to over stdio: the program and its leading
    /// arguments, started as a child process (restarted with backoff when it
    /// exits, stopped on shutdown and reload). Exactly one of `url` and
    /// `command` is set.
    pub command: Option<Vec<String>>,
    /// More arguments after `command`'s.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for the child, on top of the few of
    /// Hangar's it passes on (`PATH`, `HOME`, `LANG`, `TMPDIR`, …: see
    /// [`PASSED_ENV`]); values may hold `{{ env.VAR }}` or `{{ file./path }}`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The child starts with all of Hangar's environment (its secrets
    /// included) instead of the few variables of [`PASSED_ENV`].
    #[serde(default)]
    pub inherit_env: bool,
    /// The child's working directory (default: Hangar's).
    pub cwd: Option<String>,
    /// When the child is started: `load` (while the config loads, which
    /// waits for its tool list) or `first-use` (when first needed).
    #[serde(default)]
    pub start: Start,
    /// Put before each of its tool names; default `NAME.`.
    pub prefix: Option<String>,
    /// Sent with every request; values may hold `{{ env.VAR }}` or `{{ file./path }}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How long one request (a call included) may take.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub timeout: Duration,
    /// The most one answer may hold (a JSON body, or an SSE stream up to
    /// the answer, notifications included), counted as it arrives: past it
    /// the call fails and nothing more is read.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: usize,
    /// Only these of its tools (names as the upstream gives them) join the catalog.
    pub tools: Option<Vec<String>>,
    /// Whether its resources and resource templates (an MCP App's `ui://`
    /// views among them) are offered through Hangar, under the URIs it
    /// gives them; a URI another source offers already stays that one's.
    #[serde(default = "default_resources")]
    pub resources: bool,
    /// Whether its prompts are offered through Hangar, named with its
    /// `prefix` like its tools (and their arguments completed by it).
    #[serde(default = "default_resources")]
    pub prompts: bool,
    /// How often its tool list is fetched again (`0s` = only on its
    /// `notifications/tools/list_changed`).
    #[serde(default = "default_refresh", with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub refresh: Duration,
    /// Consecutive failures (unreachable, timeout, 5xx) that open the circuit breaker.
    #[serde(default = "default_failures")]
    pub breaker_failures: u32,
    /// How long an open breaker fails calls fast before one is let through again.
    #[serde(default = "default_cooldown", with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub breaker_cooldown: Duration,
    /// Whose token its tool calls carry as their bearer: the caller's,
    /// exchanged (`{ kind = "token-exchange", … }`), or the caller's value
    /// of a per-user provider (`{ credential = "X" }`). Without it, only
    /// `headers`. Its sessions are then per principal; listings keep using
    /// `headers` alone. HTTP upstreams only.
    pub auth: Option<UpstreamAuthConfig>,
    /// `[credentials]` providers its tools need (see `[server] hide_unconnected`).
    #[serde(default)]
    pub requires: Vec<String>,
    /// Files handed to its tools and recovered from them, by the tool's
    /// name at the upstream (see `config::adapters`; needs `[files] shared_dir`).
    #[serde(default)]
    pub adapters: BTreeMap<String, AdapterConfig>,
    /// How many times a call is sent again, in a fresh upstream session,
    /// when the upstream answers 404 for its session (it restarted).
    #[serde(default = "default_session_retries")]
    pub session_termination_retries: u32,
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_max_response_bytes() -> usize {
    8 << 20
}

fn default_session_retries() -> u32 {
    1
}

fn default_resources() -> bool {
    true
}

fn default_refresh() -> Duration {
    Duration::from_secs(300)
}

fn default_failures() -> u32 {
    3
}

fn default_cooldown() -> Duration {
    Duration::from_secs(30)
}

/// When a `command` upstream's child process is started.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Start {
    /// While the config loads: loading waits for its tool list.
    #[default]
    Load,
    /// Not while the config loads (loading does not wait for it): the
    /// background listing right after, or a call, starts it.
    FirstUse,
}

/// What `[server] pinning` does when a tool's definition changes under a
/// live session (a known tool-poisoning vector).
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Pinning {
    /// Definitions are not pinned.
    Off,
    /// The change is logged and the tool is marked in `tools/list`'s `_meta`.
    #[default]
    Warn,
    /// As `warn`, and calls to the changed tool are refused in that session
    /// until the client initializes again.
    Block,
}

/// An upstream with its placeholders substituted and checked.
#[derive(Debug, Clone)]
pub struct ResolvedUpstream {
    pub name: String,
    pub endpoint: Endpoint,
    pub prefix: String,
    pub timeout: Duration,
    pub max_response_bytes: usize,
    pub tools: Option<Vec<String>>,
    /// Its resources and templates are offered.
    pub resources: bool,
    /// Its prompts are offered.
    pub prompts: bool,
    pub refresh: Duration,
    pub breaker_failures: u32,
    pub breaker_cooldown: Duration,
    /// Whose token its calls carry (`None`: `headers` alone).
    pub auth: Option<ResolvedAuth>,
    /// Files handed to its tools and recovered from them, by remote tool name.
    pub adapters: BTreeMap<String, AdapterConfig>,
    pub session_termination_retries: u32,
}

/// How an upstream is reached.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// Streamable HTTP at `url`, `headers` sent with every request.
    Http {
        url: http::Uri,
        headers: http::HeaderMap,
    },
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio(StdioCommand),
}

/// The variables of Hangar's environment a `command` upstream's child is
/// started with (unless `inherit_env`): where programs and the user's files
/// are, the locale and time zone, a temporary folder. Nothing that usually
/// holds a secret (tokens, keys, database URLs, proxies with credentials):
/// a child is third-party code (`npx …`, `uvx …`), and what it needs beyond
/// these the config gives it by name in `env`.
pub const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
    "TERM",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
];

/// The child process of a `command` upstream, placeholders substituted.
#[derive(Debug, Clone, PartialEq)]
pub struct StdioCommand {
    pub program: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// All of Hangar's environment, not only [`PASSED_ENV`].
    pub inherit_env: bool,
    pub cwd: Option<std::path::PathBuf>,
    pub start: Start,
}

impl UpstreamConfig {
    /// Substitutes `{{ env.X }}` and checks every field. Errors name the
    /// upstream and the field, never a header value or the URL's secrets.
    pub fn resolve(
        &self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedUpstream, String> {
        let fail = |what: String| format!("upstream {name:?}: {what}");
        let endpoint = match (&self.url, &self.command) {
            (Some(url), None) => self.resolve_http(url, env, &fail)?,
            (None, Some(command)) => self.resolve_stdio(command, env, &fail)?,
            (Some(_), Some(_)) => {
                return Err(fail(
                    "set url (a server over HTTP) or command (a server over stdio), not both"
                        .into(),
                ));
            }
            (None, None) => {
                return Err(fail(
                    "set url (a server over HTTP) or command (a server over stdio)".into(),
                ));
            }
        };
        if self.timeout.is_zero() {
            return Err(fail("timeout must be more than 0s".into()));
        }
        if self.max_response_bytes < 1024 {
            return Err(fail("max_response_bytes must be at least 1024".into()));
        }
        if self.breaker_failures == 0 {
            return Err(fail("breaker_failures must be at least 1".into()));
        }
        let prefix = self.prefix.clone().unwrap_or_else(|| format!("{name}."));
        if let Some(tools) = &self.tools
            && tools.is_empty()
        {
            return Err(fail(
                "tools is empty: list some, or leave it out for all".into(),
            ));
        }
        let auth = match &self.auth {
            Some(_) if self.command.is_some() => {
                return Err(fail(
                    "auth is for url upstreams: a child process takes no bearer token".into(),
                ));
            }
            Some(auth) => Some(auth.resolve(env).map_err(fail)?),
            None => None,
        };
        for (tool, adapter) in &self.adapters {
            adapter.validate(name, tool)?;
        }
        Ok(ResolvedUpstream {
            name: name.to_string(),
            endpoint,
            auth,
            adapters: self.adapters.clone(),
            session_termination_retries: self.session_termination_retries,
            prefix,
            timeout: self.timeout,
            max_response_bytes: self.max_response_bytes,
            tools: self.tools.clone(),
            resources: self.resources,
            prompts: self.prompts,
            refresh: self.refresh,
            breaker_failures: self.breaker_failures,
            breaker_cooldown: self.breaker_cooldown,
        })
    }

    fn resolve_http(
        &self,
        url: &str,
        env: &dyn Fn(&str) -> Option<String>,
        fail: &dyn Fn(String) -> String,
    ) -> Result<Endpoint, String> {
        if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() || self.inherit_env {
            return Err(fail(
                "args, env, inherit_env and cwd are for command upstreams; a url upstream takes headers"
                    .into(),
            ));
        }
        let url = super::substitute_env(url, env).map_err(|e| fail(format!("url: {e}")))?;
        let url: http::Uri = url
            .parse()
            .map_err(|_| fail("url is not a valid URL".into()))?;
        if !matches!(url.scheme_str(), Some("http" | "https")) {
            return Err(fail("url must start with http:// or https://".into()));
        }
        if url.host().is_none() {
            return Err(fail("url has no host".into()));
        }
        let mut headers = http::HeaderMap::new();
        for (key, value) in &self.headers {
            let header = http::HeaderName::from_bytes(key.as_bytes())
                .map_err(|_| fail(format!("header {key:?} is not a valid header name")))?;
            let value = super::substitute_env(value, env)
                .map_err(|e| fail(format!("header {key}: {e}")))?;
            let mut value = http::HeaderValue::from_str(&value).map_err(|_| {
                fail(format!(
                    "header {key}: the value is not a valid header value"
                ))
            })?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        Ok(Endpoint::Http { url, headers })
    }

    fn resolve_stdio(
        &self,
        command: &[String],
        env: &dyn Fn(&str) -> Option<String>,
        fail: &dyn Fn(String) -> String,
    ) -> Result<Endpoint, String> {
        let Some((program, leading)) = command.split_first() else {
            return Err(fail(
                "command is empty: give the program (and its leading arguments)".into(),
            ));
        };
        if program.trim().is_empty() {
            return Err(fail("command's program is empty".into()));
        }
        if !self.headers.is_empty() {
            return Err(fail(
                "headers are for url upstreams; a command upstream takes env".into(),
            ));
        }
        let mut vars = BTreeMap::new();
        for (key, value) in &self.env {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                return Err(fail(format!("env {key:?} is not a valid variable name")));
            }
            let value =
                super::substitute_env(value, env).map_err(|e| fail(format!("env {key}: {e}")))?;
            vars.insert(key.clone(), value);
        }
        let cwd = self.cwd.as_ref().map(std::path::PathBuf::from);
        if let Some(dir) = &cwd
            && !dir.is_dir()
        {
            return Err(fail(format!("cwd {} is not a directory", dir.display())));
        }
        Ok(Endpoint::Stdio(StdioCommand {
            program: program.clone(),
            args: leading.iter().chain(&self.args).cloned().collect(),
            env: vars,
            inherit_env: self.inherit_env,
            cwd,
            start: self.start,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn env(var: &str) -> Option<String> {
        (var == "TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn an_upstream_parses_and_resolves() {
        let c = Config::parse(
            r#"
            [server]
            pinning = "block"
            [upstreams.weather]
            url = "http://127.0.0.1:9100/mcp"
            prefix = "w."
            headers = { authorization = "Bearer {{ env.TOKEN }}" }
            timeout = "10s"
            tools = ["forecast"]
            resources = false
            "#,
        )
        .unwrap();
        assert_eq!(c.server.pinning, Pinning::Block);
        let u = c.upstreams["weather"].resolve("weather", &env).unwrap();
        assert_eq!(u.prefix, "w.");
        assert_eq!(u.timeout, Duration::from_secs(10));
        let Endpoint::Http { headers, .. } = &u.endpoint else {
            panic!("a url upstream is reached over HTTP");
        };
        assert_eq!(headers["authorization"], "Bearer s3cret");
        assert_eq!(u.tools.as_deref(), Some(&["forecast".to_string()][..]));
        assert_eq!(u.breaker_failures, 3);
        assert!(!u.resources);
    }

    #[test]
    fn defaults_are_documented() {
        let c = Config::parse("[upstreams.a]\nurl = \"http://h/mcp\"\n").unwrap();
        assert_eq!(c.server.pinning, Pinning::Warn);
        let u = c.upstreams["a"].resolve("a", &env).unwrap();
        assert_eq!(u.prefix, "a.");
        assert_eq!(u.timeout, Duration::from_secs(30));
        assert!(
            u.resources,
            "an upstream's resources are offered unless it says not"
        );
        assert!(matches!(&u.endpoint, Endpoint::Http { headers, .. } if headers.is_empty()));
    }

    #[test]
    fn https_upstreams_resolve() {
        let c =
            Config::parse("[upstreams.a]\nurl = \"https://h/mcp?k={{ env.TOKEN }}\"\n").unwrap();
        let u = c.upstreams["a"].resolve("a", &env).unwrap();
        assert!(
            matches!(&u.endpoint, Endpoint::Http { url, .. } if url.scheme_str() == Some("https"))
        );
    }

    #[test]
    fn bad_upstreams_are_named_without_secrets() {
        let bad = |toml: &str| {
            let c = Config::parse(toml).unwrap();
            c.upstreams["u"].resolve("u", &env).unwrap_err()
        };
        let e = bad("[upstreams.u]\nurl = \"ftp://h/\"\n");
        assert!(
            e.contains("upstream \"u\"") && e.contains("https://"),
            "{e}"
        );
        let e = bad("[upstreams.u]\nurl = \"{{ env.NOPE }}\"\n");
        assert!(e.contains("NOPE"), "{e}");
        let e =
            bad("[upstreams.u]\nurl = \"http://h/\"\nheaders = { x = \"a\\nb{{ env.TOKEN }}\" }\n");
        assert!(e.contains("header x") && !e.contains("s3cret"), "{e}");
        let e = bad("[upstreams.u]\nurl = \"http://h/\"\ntimeout = \"0s\"\n");
        assert!(e.contains("timeout"), "{e}");
        let e = bad("[upstreams.u]\nurl = \"http://h/\"\ntools = []\n");
        assert!(e.contains("tools"), "{e}");
        assert!(Config::parse("[upstreams.u]\nurl = \"http://h/\"\nprefx = \"a\"\n").is_err());
    }

    #[test]
    fn a_command_upstream_resolves_its_child() {
        let c = Config::parse(
            r#"
            [upstreams.files]
            command = ["uvx", "server"]
            args = ["--root", "/srv"]
            env = { KEY = "k-{{ env.TOKEN }}" }
            cwd = "/"
            start = "first-use"
            "#,
        )
        .unwrap();
        let u = c.upstreams["files"].resolve("files", &env).unwrap();
        let Endpoint::Stdio(child) = &u.endpoint else {
            panic!("a command upstream is a child process");
        };
        assert_eq!(child.program, "uvx");
        assert_eq!(child.args, ["server", "--root", "/srv"]);
        assert_eq!(child.env["KEY"], "k-s3cret");
        assert_eq!(child.cwd.as_deref(), Some(std::path::Path::new("/")));
        assert_eq!(child.start, Start::FirstUse);
        assert_eq!(u.prefix, "files.");
    }

    #[test]
    fn exactly_one_of_url_and_command() {
        let bad = |toml: &str| {
            let c = Config::parse(toml).unwrap();
            c.upstreams["u"].resolve("u", &env).unwrap_err()
        };
        let e = bad("[upstreams.u]\nurl = \"http://h/\"\ncommand = [\"x\"]\n");
        assert!(e.contains("not both"), "{e}");
        let e = bad("[upstreams.u]\nprefix = \"u.\"\n");
        assert!(e.contains("url") && e.contains("command"), "{e}");
        let e = bad("[upstreams.u]\ncommand = []\n");
        assert!(e.contains("command is empty"), "{e}");
        let e = bad("[upstreams.u]\ncommand = [\"x\"]\nenv = { K = \"{{ env.NOPE }}\" }\n");
        assert!(e.contains("env K") && e.contains("NOPE"), "{e}");
        let e = bad("[upstreams.u]\ncommand = [\"x\"]\ncwd = \"/no/such/dir\"\n");
        assert!(e.contains("cwd"), "{e}");
        let e = bad("[upstreams.u]\nurl = \"http://h/\"\nargs = [\"a\"]\n");
        assert!(e.contains("command upstreams"), "{e}");
        assert!(Config::parse("[upstreams.u]\ncommand = [\"x\"]\nstart = \"soon\"\n").is_err());
    }
}
