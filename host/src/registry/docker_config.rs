//! Credentials from a Docker `config.json` (`[registries] docker_config`):
//! the `auths` entries `docker login` writes, so an operator who already
//! logged in need not copy the password into `hangar.toml`. Credential
//! helpers (`credsStore`, `credHelpers`) are programs Hangar does not run:
//! a registry that only has one is a clear error, not an anonymous pull.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

/// The parts of `config.json` read here; everything else is ignored.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    creds_store: Option<String>,
    #[serde(default)]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
struct AuthEntry {
    /// base64 of `username:password`.
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    /// A refresh token to exchange for an access token: not supported.
    identitytoken: Option<String>,
    /// A bearer token for the registry.
    registrytoken: Option<String>,
}

/// `https://index.docker.io/v1/`, `http://host:5000`, `host:5000/` → the
/// `host[:port]` a reference names (`docker.io` as the client resolves it).
fn registry_of(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key);
    if host == "docker.io" {
        "index.docker.io"
    } else {
        host
    }
}

/// The credentials `path` holds for `registry`; `None` when it has none.
pub(super) fn credentials(path: &Path, registry: &str) -> Result<Option<RegistryAuth>, String> {
    let where_ = format!("[registries] docker_config {}", path.display());
    let text = std::fs::read(path).map_err(|e| format!("{where_}: {e}"))?;
    let config: DockerConfig = serde_json::from_slice(&text)
        .map_err(|e| format!("{where_}: not a Docker config.json: {e}"))?;
    from_config(&config, registry).map_err(|e| format!("{where_}: {e}"))
}

fn from_config(config: &DockerConfig, registry: &str) -> Result<Option<RegistryAuth>, String> {
    let entry = config
        .auths
        .iter()
        .find(|(key, _)| registry_of(key) == registry)
        .map(|(_, entry)| entry);
    if let Some(entry) = entry {
        if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .map_err(|e| format!("auths.{registry:?}.auth is not base64: {e}"))?;
            let decoded = String::from_utf8(decoded)
                .map_err(|_| format!("auths.{registry:?}.auth is not UTF-8"))?;
            let (user, pass) = decoded
                .split_once(':')
                .ok_or_else(|| format!("auths.{registry:?}.auth is not base64 of user:password"))?;
            return Ok(Some(RegistryAuth::Basic(user.into(), pass.into())));
        }
        if let (Some(user), Some(pass)) = (&entry.username, &entry.password) {
            return Ok(Some(RegistryAuth::Basic(user.clone(), pass.clone())));
        }
        if let Some(token) = entry.registrytoken.as_deref().filter(|t| !t.is_empty()) {
            return Ok(Some(RegistryAuth::Bearer(token.into())));
        }
        if entry.identitytoken.is_some() {
            return Err(format!(
                "auths.{registry:?} holds an identitytoken, which Hangar does not exchange; \
                 use a username and password (or [registries.auth])"
            ));
        }
    }
    let helper = config
        .cred_helpers
        .iter()
        .find(|(key, _)| registry_of(key) == registry)
        .map(|(_, helper)| format!("credHelpers.{registry:?} = {helper:?}"))
        .or_else(|| {
            config
                .creds_store
                .as_ref()
                .map(|store| format!("credsStore = {store:?}"))
        });
    match helper {
        Some(helper) => Err(format!(
            "{registry} has its credentials in a credential helper ({helper}), which Hangar \
             does not run; put them in its auths (username and password) or in \
             [registries.auth.\"{registry}\"]"
        )),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> DockerConfig {
        serde_json::from_str(json).unwrap()
    }

    fn basic(auth: Option<RegistryAuth>) -> (String, String) {
        match auth {
            Some(RegistryAuth::Basic(u, p)) => (u, p),
            other => panic!("not basic: {other:?}"),
        }
    }

    #[test]
    fn auths_entries_by_host() {
        let c = parse(
            r#"{"auths": {
                "127.0.0.1:5000": {"auth": "aGFuZ2FyOnMzYzpyZXQ="},
                "https://index.docker.io/v1/": {"username": "u", "password": "p"},
                "http://other:5001/": {"auth": "eDp5"}
            }}"#,
        );
        assert_eq!(
            basic(from_config(&c, "127.0.0.1:5000").unwrap()),
            ("hangar".into(), "s3c:ret".into())
        );
        assert_eq!(
            basic(from_config(&c, "index.docker.io").unwrap()),
            ("u".into(), "p".into())
        );
        assert_eq!(
            basic(from_config(&c, "other:5001").unwrap()),
            ("x".into(), "y".into())
        );
        assert!(from_config(&c, "127.0.0.1:5001").unwrap().is_none());
    }

    #[test]
    fn helpers_and_bad_entries_are_errors() {
        let c = parse(r#"{"auths": {"r:1": {}}, "credsStore": "desktop"}"#);
        let e = from_config(&c, "r:1").unwrap_err();
        assert!(
            e.contains("credsStore = \"desktop\"") && e.contains("does not run"),
            "{e}"
        );
        let c = parse(r#"{"credHelpers": {"r:2": "ecr-login"}}"#);
        let e = from_config(&c, "r:2").unwrap_err();
        assert!(e.contains("ecr-login"), "{e}");
        assert!(from_config(&c, "r:3").unwrap().is_none());
        let c = parse(r#"{"auths": {"r:1": {"auth": "not base64!"}}}"#);
        assert!(from_config(&c, "r:1").unwrap_err().contains("not base64"));
        let c = parse(r#"{"auths": {"r:1": {"auth": "bm9jb2xvbg=="}}}"#);
        assert!(
            from_config(&c, "r:1")
                .unwrap_err()
                .contains("user:password")
        );
        let c = parse(r#"{"auths": {"r:1": {"identitytoken": "t"}}}"#);
        assert!(
            from_config(&c, "r:1")
                .unwrap_err()
                .contains("identitytoken")
        );
    }
}
