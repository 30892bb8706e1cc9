//! `hangar push`: a component published as the Wasm OCI artifact.

use super::*;

/// What goes into the manifest besides the component.
#[derive(Debug, Clone, Default)]
pub struct PushOptions {
    /// What the component asks to be granted: the `dev.hangar.requests`
    /// annotation (nothing is granted from it).
    pub requests: Option<hangar_config::Grants>,
}

impl PushOptions {
    fn annotations(&self) -> Option<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        if let Some(requests) = &self.requests {
            out.insert(
                REQUESTS_ANNOTATION.to_string(),
                requests::annotation_value(requests),
            );
        }
        (!out.is_empty()).then_some(out)
    }
}

/// Pushes `file` as the Wasm OCI artifact to `target` (`oci://…:tag`);
/// returns the manifest digest.
pub async fn push(
    config: &Config,
    file: &Path,
    target: &str,
    options: &PushOptions,
) -> anyhow::Result<String> {
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
    let manifest = OciImageManifest::build(
        std::slice::from_ref(&layer),
        &blob_config,
        options.annotations(),
    );
    let raw = serde_json::to_vec(&manifest)?;
    let digest = sha256(&raw);
    push_image(
        config,
        &source.reference,
        &layer,
        &blob_config,
        &manifest,
        raw,
    )
    .await?;
    Ok(digest)
}

/// `hangar push --sign KEY`: signs the manifest `digest` pushed to `target`
/// and pushes the signature as cosign does, under the tag
/// `sha256-<hex>.sig` in the same repository; returns that tag.
pub async fn push_signature(
    config: &Config,
    target: &str,
    digest: &str,
    key: &Path,
) -> anyhow::Result<String> {
    use super::signature::*;
    let key = SigningKey::load(key).map_err(|e| anyhow::anyhow!(e))?;
    let source = parse_source(target).map_err(|e| anyhow::anyhow!("{target}: {e}"))?;
    let image = &source.reference;
    let docker_reference = format!("{}/{}", image.registry(), image.repository());
    let body = payload(&docker_reference, digest);
    let signature =
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, key.sign(&body));
    let layer = ImageLayer::new(
        body,
        SIMPLE_SIGNING_MEDIA_TYPE.to_string(),
        Some(BTreeMap::from([(
            SIGNATURE_ANNOTATION.to_string(),
            signature,
        )])),
    );
    // cosign's signature image: an empty-ish OCI image config.
    let sig_config = serde_json::json!({
        "architecture": "",
        "os": "",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": [sha256(&layer.data)]},
    });
    let blob_config = BlobConfig {
        data: serde_json::to_vec(&sig_config)?.into(),
        media_type: "application/vnd.oci.image.config.v1+json".to_string(),
        annotations: None,
    };
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &blob_config, None);
    let tag = signature_tag(digest);
    let sig_ref = Reference::with_tag(
        image.registry().to_string(),
        image.repository().to_string(),
        tag.clone(),
    );
    let raw = serde_json::to_vec(&manifest)?;
    push_image(config, &sig_ref, &layer, &blob_config, &manifest, raw).await?;
    Ok(tag)
}

/// `hangar sign`: signs the manifest `target` (`oci://…:tag`) names now, an
/// image pushed by anything (`scripts/image --push`), as `hangar push
/// --sign` signs what it pushes; returns the signed digest and the
/// signature's tag. The digest is that of the manifest bytes the registry
/// serves, read (bounded) as a pull reads them.
pub async fn sign(config: &Config, target: &str, key: &Path) -> anyhow::Result<(String, String)> {
    check_signing_key(key)?;
    let source = parse_source(target).map_err(|e| anyhow::anyhow!("{target}: {e}"))?;
    let registry = Registry::new(&config.registries).map_err(|e| anyhow::anyhow!(e))?;
    let accepted = [OCI_IMAGE_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE];
    let raw = registry
        .manifest(&source.reference, &accepted)
        .await
        .map_err(|f| match registry.pull_error(&source.reference, f) {
            PullError::Unreachable(why) | PullError::Refused(why) => {
                anyhow::anyhow!("{target}: {why}")
            }
        })?;
    let digest = sha256(&raw);
    let tag = push_signature(config, target, &digest, key).await?;
    Ok((digest, tag))
}

/// Pushes one image to `reference`: its one layer, its config blob, then
/// the manifest `raw` (the serialized `manifest`), with the config's
/// `[registries]` credentials and plain-HTTP list.
async fn push_image(
    config: &Config,
    reference: &Reference,
    layer: &ImageLayer,
    blob_config: &BlobConfig,
    manifest: &OciImageManifest,
    raw: Vec<u8>,
) -> anyhow::Result<()> {
    let registry = reference.resolve_registry().to_string();
    let auth = auth_for(&config.registries, &registry).map_err(|e| anyhow::anyhow!(e))?;
    let client = client(&config.registries);
    let insecure = config.registries.insecure.contains(&registry);
    let fail = |e: oci_client::errors::OciDistributionError| {
        anyhow::anyhow!("{}", explain(&e, &registry, insecure))
    };
    client.store_auth_if_needed(&registry, &auth).await;
    client
        .push_blob(reference, layer.data.clone(), &sha256(&layer.data))
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
    Ok(())
}

/// Fails when `key` is not a private key `hangar push --sign` can sign with.
pub fn check_signing_key(key: &Path) -> anyhow::Result<()> {
    super::signature::SigningKey::load(key)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!(e))
}
