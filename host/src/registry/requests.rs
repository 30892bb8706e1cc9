//! What a component asks to be granted, carried with it as the manifest
//! annotation `dev.hangar.requests` (JSON in the vocabulary of
//! `[plugins.X] grants`). Information for the operator only: nothing is
//! granted from it; `hangar.toml`'s grants alone decide.

use super::*;
use hangar_config::Grants;

/// The manifest annotation holding a component's requested grants.
pub const REQUESTS_ANNOTATION: &str = "dev.hangar.requests";

/// Reads a requests file for `hangar push --requests`: TOML with the keys
/// of a `grants` table (`http = [...]`, `credentials = [...]`).
pub fn read_requests_file(path: &Path) -> anyhow::Result<Grants> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--requests {}: {e}", path.display()))?;
    let requests: Grants = toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--requests {}: not a grants table (http = [...], credentials = [...]): {e}",
            path.display()
        )
    })?;
    Ok(requests)
}

/// The annotation's value for `requests`.
pub(super) fn annotation_value(requests: &Grants) -> String {
    serde_json::to_string(requests).expect("grants serialize")
}

/// What the component behind the cached manifest `manifest_digest` asks
/// for: `None` when its manifest carries no `dev.hangar.requests`; an
/// error when the annotation is not readable or the manifest is not cached.
pub fn requests(config: &Config, manifest_digest: &str) -> Result<Option<Grants>, String> {
    let store = Store::new(&config.server.cache_dir);
    let raw = store
        .read(manifest_digest)
        .ok_or_else(|| format!("manifest {manifest_digest} is not in the cache"))?;
    from_manifest(&raw)
}

fn from_manifest(raw: &[u8]) -> Result<Option<Grants>, String> {
    let manifest: OciImageManifest =
        serde_json::from_slice(raw).map_err(|e| format!("not an OCI image manifest: {e}"))?;
    let Some(value) = manifest
        .annotations
        .as_ref()
        .and_then(|a| a.get(REQUESTS_ANNOTATION))
    else {
        return Ok(None);
    };
    serde_json::from_str(value)
        .map(Some)
        .map_err(|e| format!("the {REQUESTS_ANNOTATION} annotation is not a grants object: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(annotations: serde_json::Value) -> Vec<u8> {
        let d = format!("sha256:{}", "a".repeat(64));
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_IMAGE_MEDIA_TYPE,
            "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": d, "size": 2},
            "layers": [{"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": d, "size": 8}],
            "annotations": annotations,
        }))
        .unwrap()
    }

    #[test]
    fn the_annotation_reads_back_as_grants() {
        let asked = Grants {
            http: vec!["api.example.com".into(), "127.0.0.1:9000".into()],
            credentials: vec!["github".into()],
        };
        let raw = manifest(serde_json::json!({ REQUESTS_ANNOTATION: annotation_value(&asked) }));
        assert_eq!(from_manifest(&raw).unwrap(), Some(asked));
        assert_eq!(
            from_manifest(&manifest(serde_json::json!({}))).unwrap(),
            None
        );
        let bad = manifest(serde_json::json!({ REQUESTS_ANNOTATION: r#"{"kv": ["x"]}"# }));
        let e = from_manifest(&bad).unwrap_err();
        assert!(e.contains("dev.hangar.requests") && e.contains("kv"), "{e}");
    }
}
