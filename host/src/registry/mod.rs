//! Plugins from OCI registries: `[plugins.X] source = "oci://…"`, pulled as
//! the CNCF Wasm OCI artifact (an image manifest whose config is
//! `application/vnd.wasm.config.v0+json` with one `application/wasm`
//! layer), checked against an optional manifest digest pin and stored
//! content-addressed under `<cache_dir>/oci/`. Below the loader: it hands
//! the loader a file per plugin, loaded like one in `plugins/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config as BlobConfig, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};

use hangar_config::{Config, RegistriesConfig};

mod docker_config;
mod fetch;
mod pull;
mod push;
mod requests;
mod signature;
mod source;
mod store;
mod trust;

use fetch::*;
pub use hangar_config::TrustedKey;
use pull::*;
pub use push::{PushOptions, check_signing_key, push, push_signature, sign};
pub use requests::{REQUESTS_ANNOTATION, read_requests_file, requests};
use source::*;
use store::*;
pub use trust::SignatureStatus;
use trust::*;

pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// A component declared bigger than this is refused before it is
/// downloaded; one streaming past its declared size, while it arrives.
const MAX_LAYER_BYTES: i64 = 256 << 20;

/// Where a plugin's bytes came from this time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    Registry,
    Cache,
}

impl Fetched {
    pub fn as_str(self) -> &'static str {
        match self {
            Fetched::Registry => "registry",
            Fetched::Cache => "cache",
        }
    }
}

/// A plugin whose component is on disk, ready to load.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The `[plugins.X]` key: the plugin's name.
    pub name: String,
    /// The `source` as configured.
    pub source: String,
    /// The manifest digest it resolved to.
    pub digest: String,
    /// The component's bytes, under the cache directory.
    pub path: PathBuf,
    pub fetched: Fetched,
    /// What the signature check found (`[trust]`).
    pub signature: SignatureStatus,
}

impl Resolved {
    /// The digest the component's bytes hash to: its file in the store is
    /// named by it (`oci/sha256/<hex>`), and the loader checks the bytes it
    /// reads against it.
    pub fn layer_digest(&self) -> String {
        let hex = self.path.file_name().unwrap_or_default().to_string_lossy();
        format!("sha256:{hex}")
    }
}

/// What resolving a plugin met: a refusal (`resolved` is none) or, with a
/// cached fallback, why the registry was not asked successfully.
#[derive(Debug, Clone)]
pub struct Problem {
    pub name: String,
    pub source: String,
    pub reason: String,
}

impl Problem {
    pub fn message(&self) -> String {
        format!(
            "plugin {:?} from {}: {}",
            self.name, self.source, self.reason
        )
    }
}

/// Everything resolved for one config.
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    pub resolved: Vec<Resolved>,
    pub problems: Vec<Problem>,
    /// Plugins refused outright (not served at all).
    pub refused: Vec<String>,
}

/// Resolves one plugin's source: from the registry, else (the registry
/// not reached) from the cache for a pinned digest or a tag pulled before;
/// then judges it by `[trust]`.
async fn resolve_one(
    registry: &Registry,
    config: &Config,
    store: &Store,
    (name, source_text, digest): (&str, &str, Option<&str>),
    contact: Contact,
    out: &mut Resolution,
) {
    let problem = |reason: String| Problem {
        name: name.to_string(),
        source: source_text.to_string(),
        reason,
    };
    let refuse = |out: &mut Resolution, reason: String| {
        tracing::error!(plugin = name, source = source_text, "refused: {reason}");
        out.problems.push(problem(reason));
        out.refused.push(name.to_string());
    };
    let parsed = parse_source(source_text)
        .and_then(|s| pin_of(&s, digest).map(|p| (s, p)))
        .and_then(|(s, p)| check_pinned(&config.trust, p.as_deref()).map(|_| (s, p)));
    let (source, pin) = match parsed {
        Ok(p) => p,
        Err(reason) => return refuse(out, reason),
    };
    let resolved = |digest: String, path: PathBuf, fetched: Fetched, signature| Resolved {
        name: name.to_string(),
        source: source_text.to_string(),
        digest,
        path,
        fetched,
        signature,
    };
    // From the cache, the signatures kept beside it are judged again.
    let judged_from_cache = |digest: &str| {
        let signed = cached_signatures(store, &source, digest);
        judge(&config.trust, digest, signed.as_deref())
    };
    // Only when this very reference last resolved to the pin: a tag that
    // moved since is asked again (and refused).
    if contact == Contact::UnlessPinnedAndCached
        && let Some(pin) = &pin
        && store.refs().get(&source.reference.whole()) == Some(pin)
        && let Some(path) = from_cache(store, pin)
    {
        let signature = judged_from_cache(pin);
        if let Err(reason) = enforce(&config.trust, &signature) {
            return refuse(out, reason);
        }
        out.resolved
            .push(resolved(pin.clone(), path, Fetched::Cache, signature));
        return;
    }
    let pulled = match pull_one(registry, store, &source, pin.as_deref()).await {
        Ok((digest, path)) if checks_signatures(&config.trust) => {
            match fetch_signatures(registry, store, &source, &digest).await {
                Ok(signed) => {
                    let signature = judge(&config.trust, &digest, signed.as_deref());
                    Ok((digest, path, signature))
                }
                // Nothing needs the signature: a `.sig` lookup that failed
                // (a 500, a reset, a malformed answer) must not refuse a
                // component the config would serve unsigned.
                Err(PullError::Unreachable(why) | PullError::Refused(why))
                    if !requires_signature(&config.trust) =>
                {
                    tracing::warn!(
                        plugin = name,
                        source = source_text,
                        %digest,
                        "the signature lookup failed; serving it unverified: {why}"
                    );
                    out.problems.push(problem(format!(
                        "the signature lookup failed, serving {digest} unverified: {why}"
                    )));
                    let status = SignatureStatus::Unverified(format!("the lookup failed: {why}"));
                    Ok((digest, path, status))
                }
                Err(e) => Err(e),
            }
        }
        Ok((digest, path)) => Ok((digest, path, SignatureStatus::NotChecked)),
        Err(e) => Err(e),
    };
    match pulled {
        Ok((digest, path, signature)) => {
            if let Err(reason) = enforce(&config.trust, &signature) {
                return refuse(out, reason);
            }
            tracing::info!(plugin = name, source = source_text, %digest, signature = %signature.describe(), "pulled from the registry");
            out.resolved
                .push(resolved(digest, path, Fetched::Registry, signature))
        }
        Err(PullError::Refused(reason)) => refuse(out, reason),
        Err(PullError::Unreachable(reason)) => {
            let known = pin
                .clone()
                .or_else(|| store.refs().get(&source.reference.whole()).cloned());
            match known.and_then(|d| from_cache(store, &d).map(|p| (d, p))) {
                Some((digest, path)) => {
                    let signature = judged_from_cache(&digest);
                    if let Err(why) = enforce(&config.trust, &signature) {
                        return refuse(
                            out,
                            format!("registry unreachable and the cached {digest}: {why}"),
                        );
                    }
                    tracing::warn!(
                        plugin = name,
                        source = source_text,
                        %digest,
                        "registry unreachable; serving the cached component: {reason}"
                    );
                    out.problems.push(problem(format!(
                        "registry unreachable, serving the cached {digest}: {reason}"
                    )));
                    out.resolved
                        .push(resolved(digest, path, Fetched::Cache, signature));
                }
                None => {
                    let reason = if pin.is_some() {
                        format!(
                            "registry unreachable and the pinned digest is not cached: {reason}"
                        )
                    } else {
                        format!("registry unreachable and this tag was never pulled: {reason}")
                    };
                    refuse(out, reason);
                }
            }
        }
    }
}

/// When the registry is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contact {
    /// Always (start-up, `hangar check`, `hangar pull`): the cache is the
    /// fallback, and using it is a problem.
    Always,
    /// Not for a pinned digest already cached as what this reference
    /// resolved to (a reload): its bytes cannot have changed, and a registry
    /// outage then blocks no reload.
    UnlessPinnedAndCached,
}

/// Resolves every `[plugins.X]` with a `source`, one after another (each
/// registry is asked once per plugin).
pub async fn resolve(config: &Config, contact: Contact) -> Resolution {
    let mut out = Resolution::default();
    let sources: Vec<_> = config
        .plugins
        .iter()
        .filter_map(|(name, p)| Some((name, p.source.as_deref()?, p.digest.as_deref())))
        .collect();
    for (name, p) in &config.plugins {
        if p.source.is_none() && p.digest.is_some() {
            out.problems.push(Problem {
                name: name.clone(),
                source: "plugins/".into(),
                reason: "digest is set without a source".into(),
            });
        }
    }
    if sources.is_empty() {
        return out;
    }
    let registry = match Registry::new(&config.registries) {
        Ok(r) => r,
        Err(reason) => {
            for (name, source, _) in sources {
                tracing::error!(plugin = %name, source, "refused: {reason}");
                out.problems.push(Problem {
                    name: name.clone(),
                    source: source.to_string(),
                    reason: reason.clone(),
                });
                out.refused.push(name.clone());
            }
            return out;
        }
    };
    let store = Store::new(&config.server.cache_dir);
    for (name, source, digest) in sources {
        resolve_one(
            &registry,
            config,
            &store,
            (name, source, digest),
            contact,
            &mut out,
        )
        .await;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config_type: &str, layers: &[&str]) -> Vec<u8> {
        let d = format!("sha256:{}", "a".repeat(64));
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_IMAGE_MEDIA_TYPE,
            "config": {"mediaType": config_type, "digest": d, "size": 2},
            "layers": layers.iter().map(|t| serde_json::json!({"mediaType": t, "digest": d, "size": 8})).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    #[test]
    fn only_the_wasm_artifact_shape_is_accepted() {
        assert!(wasm_layer(&manifest(WASM_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE])).is_ok());
        let e = wasm_layer(&manifest(
            WASM_CONFIG_MEDIA_TYPE,
            &["application/octet-stream"],
        ))
        .unwrap_err();
        assert!(e.contains("layer media type"), "{e}");
        let e = wasm_layer(&manifest(
            "application/vnd.oci.image.config.v1+json",
            &[WASM_LAYER_MEDIA_TYPE],
        ))
        .unwrap_err();
        assert!(e.contains("config media type"), "{e}");
        let e = wasm_layer(&manifest(
            WASM_CONFIG_MEDIA_TYPE,
            &[WASM_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE],
        ))
        .unwrap_err();
        assert!(e.contains("2 layers"), "{e}");
    }

    #[test]
    fn pins_and_references() {
        let d = format!("sha256:{}", "b".repeat(64));
        let s = parse_source("oci://127.0.0.1:5000/tools/echo:1.0").unwrap();
        assert_eq!(s.reference.registry(), "127.0.0.1:5000");
        assert_eq!(pin_of(&s, None).unwrap(), None);
        assert_eq!(pin_of(&s, Some(&d)).unwrap(), Some(d.clone()));
        assert!(pin_of(&s, Some("sha256:xyz")).is_err());
        let s = parse_source(&format!("oci://127.0.0.1:5000/tools/echo@{d}")).unwrap();
        assert_eq!(pin_of(&s, None).unwrap(), Some(d.clone()));
        let other = format!("sha256:{}", "c".repeat(64));
        assert!(pin_of(&s, Some(&other)).is_err());
        assert!(parse_source("https://x/y:1").is_err());
    }
}
