//! Asking a registry for a component: the client, its credentials, the
//! artifact's shape, and what a failure means.

use super::*;

/// Why a pull failed: the registry could not be asked (a cached copy may
/// serve), or it answered with something refused (nothing serves).
pub(super) enum PullError {
    Unreachable(String),
    Refused(String),
}

pub(super) fn client(registries: &RegistriesConfig) -> Client {
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

/// The credentials for `registry`: `[registries.auth."host:port"]` with
/// `{{ env.VAR }}` substituted, else the `docker_config` file's, else none.
pub(super) fn auth_for(
    registries: &RegistriesConfig,
    registry: &str,
) -> Result<RegistryAuth, String> {
    let Some(auth) = registries.auth.get(registry) else {
        return match &registries.docker_config {
            Some(path) => {
                Ok(docker_config::credentials(path, registry)?.unwrap_or(RegistryAuth::Anonymous))
            }
            None => Ok(RegistryAuth::Anonymous),
        };
    };
    let env = |k: &str| std::env::var(k).ok();
    let sub = |v: &str| {
        hangar_config::substitute_env(v, &env)
            .map_err(|e| format!("[registries.auth.{registry:?}]: {e}"))
    };
    Ok(RegistryAuth::Basic(
        sub(&auth.username)?,
        sub(&auth.password)?,
    ))
}

/// Whether an error from the client means the registry was not reached.
pub(super) fn unreachable(e: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::OciDistributionError as E;
    match e {
        E::RequestError(e) => e.is_connect() || e.is_timeout(),
        _ => false,
    }
}

/// Checks the manifest is the Wasm OCI artifact; returns its layer.
pub(super) fn wasm_layer(raw: &[u8]) -> Result<oci_client::manifest::OciDescriptor, String> {
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

/// Pulls one source from its registry into the store; returns the
/// manifest digest and the component's path. The manifest is read up to
/// `MAX_MANIFEST_BYTES` and the layer up to its declared size, straight to
/// a temporary file in the store and hashed on the way: no body is ever
/// held whole in memory, however much the registry sends.
pub(super) async fn pull_one(
    registry: &Registry,
    store: &Store,
    source: &Source,
    pin: Option<&str>,
) -> Result<(String, PathBuf), PullError> {
    let reference = &source.reference;
    let accepted = [OCI_IMAGE_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE];
    let raw = registry
        .manifest(reference, &accepted)
        .await
        .map_err(|f| registry.pull_error(reference, f))?;
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
            let cannot_store =
                |e: std::io::Error| PullError::Refused(format!("cannot store the layer: {e}"));
            let mut pending = store.pending(&layer.digest).map_err(cannot_store)?;
            registry
                .blob(
                    reference,
                    (&layer.digest, layer.size),
                    "layer",
                    pending.writer(),
                )
                .await
                .map_err(|f| match f {
                    // Already says which layer.
                    Failure::Refused(why) => PullError::Refused(why),
                    f => match registry.pull_error(reference, f) {
                        PullError::Unreachable(e) => {
                            PullError::Unreachable(format!("layer {}: {e}", layer.digest))
                        }
                        PullError::Refused(e) => {
                            PullError::Refused(format!("layer {}: {e}", layer.digest))
                        }
                    },
                })?;
            pending.keep().map_err(cannot_store)?
        }
    };
    store
        .write(&digest, &raw)
        .and_then(|_| store.remember(&reference.whole(), &digest))
        .map_err(|e| PullError::Refused(format!("cannot store the manifest: {e}")))?;
    Ok((digest, path))
}

pub(super) fn explain(
    e: &oci_client::errors::OciDistributionError,
    registry: &str,
    insecure: bool,
) -> String {
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
