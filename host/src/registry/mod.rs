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

use crate::config::{Config, RegistriesConfig};

pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// A component bigger than this is refused before it is downloaded.
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

/// A parsed `oci://` source.
struct Source {
    reference: Reference,
    /// The digest the reference itself names (`…@sha256:…`).
    by_digest: Option<String>,
}

fn parse_source(source: &str) -> Result<Source, String> {
    let rest = source
        .strip_prefix("oci://")
        .ok_or_else(|| "source must start with oci://".to_string())?;
    let reference: Reference = rest
        .parse()
        .map_err(|e| format!("not an OCI reference: {e}"))?;
    if !rest.contains('/') || reference.registry().is_empty() {
        return Err("an OCI reference needs host[:port]/repository".into());
    }
    let by_digest = reference.digest().map(str::to_string);
    if let Some(d) = &by_digest {
        check_digest_syntax(d)?;
    }
    Ok(Source {
        reference,
        by_digest,
    })
}

fn check_digest_syntax(digest: &str) -> Result<(), String> {
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or_else(|| format!("digest {digest:?} is not sha256:<64 hex digits>"))?;
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return Err(format!("digest {digest:?} is not sha256:<64 hex digits>"));
    }
    Ok(())
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The content-addressed store: `oci/sha256/<hex>` (layers and manifests,
/// by their own digest) and `oci/refs.json` (reference → manifest digest).
struct Store {
    dir: PathBuf,
}

impl Store {
    fn new(cache_dir: &Path) -> Store {
        Store {
            dir: cache_dir.join("oci"),
        }
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.dir.join("sha256").join(hex)
    }

    /// The blob, when stored and still hashing to `digest`.
    fn read(&self, digest: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.blob_path(digest)).ok()?;
        (sha256(&bytes) == digest).then_some(bytes)
    }

    fn write(&self, digest: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        let path = self.blob_path(digest);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    fn refs_path(&self) -> PathBuf {
        self.dir.join("refs.json")
    }

    fn refs(&self) -> BTreeMap<String, String> {
        std::fs::read(self.refs_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn remember(&self, reference: &str, digest: &str) -> std::io::Result<()> {
        let mut refs = self.refs();
        if refs.get(reference).map(String::as_str) == Some(digest) {
            return Ok(());
        }
        refs.insert(reference.to_string(), digest.to_string());
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self
            .refs_path()
            .with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&refs)?)?;
        std::fs::rename(&tmp, self.refs_path())
    }
}

/// Why a pull failed: the registry could not be asked (a cached copy may
/// serve), or it answered with something refused (nothing serves).
enum PullError {
    Unreachable(String),
    Refused(String),
}

fn client(registries: &RegistriesConfig) -> Client {
    Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(registries.insecure.clone()),
        connect_timeout: Some(Duration::from_secs(5)),
        read_timeout: Some(Duration::from_secs(60)),
        // A manifest list is not a Wasm artifact: refuse it, pick nothing.
        platform_resolver: None,
        user_agent: concat!("hangar/", env!("CARGO_PKG_VERSION")),
        ..Default::default()
    })
}

/// The credentials for `registry`, `{{ env.VAR }}` substituted.
fn auth_for(registries: &RegistriesConfig, registry: &str) -> Result<RegistryAuth, String> {
    let Some(auth) = registries.auth.get(registry) else {
        return Ok(RegistryAuth::Anonymous);
    };
    let env = |k: &str| std::env::var(k).ok();
    let sub = |v: &str| {
        crate::config::substitute_env(v, &env)
            .map_err(|e| format!("[registries.auth.{registry:?}]: {e}"))
    };
    Ok(RegistryAuth::Basic(
        sub(&auth.username)?,
        sub(&auth.password)?,
    ))
}

/// Whether an error from the client means the registry was not reached.
fn unreachable(e: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::OciDistributionError as E;
    match e {
        E::RequestError(e) => e.is_connect() || e.is_timeout(),
        _ => false,
    }
}

/// Checks the manifest is the Wasm OCI artifact; returns its layer.
fn wasm_layer(raw: &[u8]) -> Result<oci_client::manifest::OciDescriptor, String> {
    let manifest: OciImageManifest = serde_json::from_slice(raw)
        .map_err(|e| format!("not an OCI image manifest (a Wasm artifact): {e}"))?;
    if let Some(mt) = &manifest.media_type
        && mt != OCI_IMAGE_MEDIA_TYPE
        && mt != DOCKER_MANIFEST_MEDIA_TYPE
    {
        return Err(format!(
            "manifest media type {mt:?} is not an image manifest (a Wasm artifact)"
        ));
    }
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "not a Wasm artifact: config media type {:?}, expected {WASM_CONFIG_MEDIA_TYPE:?}",
            manifest.config.media_type
        ));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(format!(
            "not a Wasm artifact: {} layers, expected one {WASM_LAYER_MEDIA_TYPE:?} layer",
            manifest.layers.len()
        ));
    };
    if layer.media_type != WASM_LAYER_MEDIA_TYPE {
        return Err(format!(
            "not a Wasm artifact: layer media type {:?}, expected {WASM_LAYER_MEDIA_TYPE:?}",
            layer.media_type
        ));
    }
    check_digest_syntax(&layer.digest).map_err(|e| format!("layer: {e}"))?;
    if layer.size > MAX_LAYER_BYTES || layer.size < 0 {
        return Err(format!("layer of {} bytes is too large", layer.size));
    }
    Ok(layer.clone())
}

/// The pin a source must resolve to: `digest`, the reference's own
/// `@sha256:…`, or none; refused when the two disagree.
fn pin_of(source: &Source, digest: Option<&str>) -> Result<Option<String>, String> {
    if let Some(d) = digest {
        check_digest_syntax(d).map_err(|e| format!("digest: {e}"))?;
    }
    match (digest, source.by_digest.as_deref()) {
        (Some(a), Some(b)) if a != b => Err(format!(
            "the pin {a} differs from the reference's own digest {b}"
        )),
        (Some(a), _) | (None, Some(a)) => Ok(Some(a.to_string())),
        (None, None) => Ok(None),
    }
}

/// Pulls one source from its registry into the store; returns the
/// manifest digest and the component's path.
async fn pull_one(
    client: &Client,
    registries: &RegistriesConfig,
    store: &Store,
    source: &Source,
    pin: Option<&str>,
) -> Result<(String, PathBuf), PullError> {
    let reference = &source.reference;
    let registry = reference.resolve_registry().to_string();
    let auth = auth_for(registries, &registry).map_err(PullError::Refused)?;
    let accepted = [OCI_IMAGE_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE];
    let (raw, _) = client
        .pull_manifest_raw(reference, &auth, &accepted)
        .await
        .map_err(|e| {
            let insecure = registries.insecure.contains(&registry);
            let text = explain(&e, &registry, insecure);
            if unreachable(&e) {
                PullError::Unreachable(text)
            } else {
                PullError::Refused(text)
            }
        })?;
    let digest = sha256(&raw);
    if let Some(pin) = pin
        && pin != digest
    {
        return Err(PullError::Refused(format!(
            "manifest digest {digest} does not match the pinned {pin}"
        )));
    }
    let layer = wasm_layer(&raw).map_err(PullError::Refused)?;
    let path = match store.read(&layer.digest) {
        Some(_) => store.blob_path(&layer.digest),
        None => {
            let mut bytes = Vec::with_capacity(layer.size as usize);
            client
                .pull_blob(reference, &layer, &mut bytes)
                .await
                .map_err(|e| {
                    if unreachable(&e) {
                        PullError::Unreachable(format!("layer {}: {e}", layer.digest))
                    } else {
                        PullError::Refused(format!("layer {}: {e}", layer.digest))
                    }
                })?;
            let got = sha256(&bytes);
            if got != layer.digest {
                return Err(PullError::Refused(format!(
                    "layer bytes hash to {got}, the manifest says {}",
                    layer.digest
                )));
            }
            store
                .write(&layer.digest, &bytes)
                .map_err(|e| PullError::Refused(format!("cannot store the layer: {e}")))?
        }
    };
    store
        .write(&digest, &raw)
        .and_then(|_| store.remember(&reference.whole(), &digest))
        .map_err(|e| PullError::Refused(format!("cannot store the manifest: {e}")))?;
    Ok((digest, path))
}

fn explain(e: &oci_client::errors::OciDistributionError, registry: &str, insecure: bool) -> String {
    use oci_client::errors::OciDistributionError as E;
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    if !insecure && matches!(e, E::RequestError(_)) {
        return format!(
            "cannot reach {registry} over HTTPS ({text}); a plain-HTTP registry must be listed in [registries] insecure"
        );
    }
    format!("registry {registry}: {text}")
}

/// The cached component for `manifest_digest`, when its manifest and layer
/// are stored and intact.
fn from_cache(store: &Store, manifest_digest: &str) -> Option<PathBuf> {
    let raw = store.read(manifest_digest)?;
    let layer = wasm_layer(&raw).ok()?;
    store.read(&layer.digest)?;
    Some(store.blob_path(&layer.digest))
}

/// Resolves one plugin's source: from the registry, else (the registry
/// not reached) from the cache for a pinned digest or a tag pulled before.
async fn resolve_one(
    client: &Client,
    config: &Config,
    store: &Store,
    (name, source_text, digest): (&str, &str, Option<&str>),
    ask: Ask,
    out: &mut Resolution,
) {
    let problem = |reason: String| Problem {
        name: name.to_string(),
        source: source_text.to_string(),
        reason,
    };
    let parsed = parse_source(source_text).and_then(|s| pin_of(&s, digest).map(|p| (s, p)));
    let (source, pin) = match parsed {
        Ok(p) => p,
        Err(reason) => {
            out.problems.push(problem(reason));
            out.refused.push(name.to_string());
            return;
        }
    };
    // Only when this very reference last resolved to the pin: a tag that
    // moved since is asked again (and refused).
    if ask == Ask::UnlessPinnedAndCached
        && let Some(pin) = &pin
        && store.refs().get(&source.reference.whole()) == Some(pin)
        && let Some(path) = from_cache(store, pin)
    {
        out.resolved.push(Resolved {
            name: name.to_string(),
            source: source_text.to_string(),
            digest: pin.clone(),
            path,
            fetched: Fetched::Cache,
        });
        return;
    }
    match pull_one(client, &config.registries, store, &source, pin.as_deref()).await {
        Ok((digest, path)) => {
            tracing::info!(plugin = name, source = source_text, %digest, "pulled from the registry");
            out.resolved.push(Resolved {
                name: name.to_string(),
                source: source_text.to_string(),
                digest,
                path,
                fetched: Fetched::Registry,
            })
        }
        Err(PullError::Refused(reason)) => {
            tracing::error!(plugin = name, source = source_text, "refused: {reason}");
            out.problems.push(problem(reason));
            out.refused.push(name.to_string());
        }
        Err(PullError::Unreachable(reason)) => {
            let known = pin
                .clone()
                .or_else(|| store.refs().get(&source.reference.whole()).cloned());
            match known.and_then(|d| from_cache(store, &d).map(|p| (d, p))) {
                Some((digest, path)) => {
                    tracing::warn!(
                        plugin = name,
                        source = source_text,
                        %digest,
                        "registry unreachable; serving the cached component: {reason}"
                    );
                    out.problems.push(problem(format!(
                        "registry unreachable, serving the cached {digest}: {reason}"
                    )));
                    out.resolved.push(Resolved {
                        name: name.to_string(),
                        source: source_text.to_string(),
                        digest,
                        path,
                        fetched: Fetched::Cache,
                    });
                }
                None => {
                    let reason = if pin.is_some() {
                        format!(
                            "registry unreachable and the pinned digest is not cached: {reason}"
                        )
                    } else {
                        format!("registry unreachable and this tag was never pulled: {reason}")
                    };
                    tracing::error!(plugin = name, source = source_text, "refused: {reason}");
                    out.problems.push(problem(reason));
                    out.refused.push(name.to_string());
                }
            }
        }
    }
}

/// When the registry is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
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
pub async fn resolve(config: &Config, ask: Ask) -> Resolution {
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
    let client = client(&config.registries);
    let store = Store::new(&config.server.cache_dir);
    for (name, source, digest) in sources {
        resolve_one(
            &client,
            config,
            &store,
            (name, source, digest),
            ask,
            &mut out,
        )
        .await;
    }
    out
}

/// Pushes `file` as the Wasm OCI artifact to `target` (`oci://…:tag`);
/// returns the manifest digest.
pub async fn push(config: &Config, file: &Path, target: &str) -> anyhow::Result<String> {
    let source = parse_source(target).map_err(|e| anyhow::anyhow!("{target}: {e}"))?;
    let bytes = std::fs::read(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    if !bytes.starts_with(b"\0asm") {
        anyhow::bail!("{}: not a WebAssembly file", file.display());
    }
    let layer = ImageLayer::new(bytes.clone(), WASM_LAYER_MEDIA_TYPE.to_string(), None);
    let layer_digest = sha256(&bytes);
    let wasm_config = serde_json::json!({
        "created": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    });
    let blob_config = BlobConfig {
        data: serde_json::to_vec(&wasm_config)?.into(),
        media_type: WASM_CONFIG_MEDIA_TYPE.to_string(),
        annotations: None,
    };
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &blob_config, None);
    let raw = serde_json::to_vec(&manifest)?;
    let digest = sha256(&raw);
    let reference = &source.reference;
    let registry = reference.resolve_registry().to_string();
    let auth = auth_for(&config.registries, &registry).map_err(|e| anyhow::anyhow!(e))?;
    let client = client(&config.registries);
    let insecure = config.registries.insecure.contains(&registry);
    let fail = |e: oci_client::errors::OciDistributionError| {
        anyhow::anyhow!("{}", explain(&e, &registry, insecure))
    };
    client.store_auth_if_needed(&registry, &auth).await;
    client
        .push_blob(reference, layer.data.clone(), &layer_digest)
        .await
        .map_err(fail)?;
    client
        .push_blob(reference, blob_config.data.clone(), &manifest.config.digest)
        .await
        .map_err(fail)?;
    client
        .push_manifest_raw(
            reference,
            raw,
            http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE),
        )
        .await
        .map_err(fail)?;
    Ok(digest)
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
