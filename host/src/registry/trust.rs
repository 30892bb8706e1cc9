//! Judging a pulled component by `[trust]`: its pin (`require = "pinned"`)
//! and its cosign signatures (`require = "signed"`, or whenever keys are
//! set), fetched from the `sha256-<hex>.sig` tag beside it. The signature
//! manifest and payloads are kept in the cache with the component, so a
//! start from the cache (registry down) judges the same bytes the same way.

use base64::Engine;
use oci_client::manifest::OciDescriptor;

use super::signature::*;
use super::*;
use hangar_config::{Require, TrustConfig};

/// A signature payload declared bigger than this is refused before it is
/// downloaded; one streaming past its declared size, while it arrives.
const MAX_PAYLOAD_BYTES: i64 = 64 << 10;

/// What the signature check of a plugin found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureStatus {
    /// No `[trust] keys`: signatures were not looked at.
    NotChecked,
    /// No signature beside the artifact (no `sha256-<hex>.sig` tag).
    Unsigned,
    /// A valid signature by the key with this id, over this very digest.
    SignedBy(String),
    /// Signatures are there, none by a trusted key over this digest: why.
    Invalid(String),
    /// The signature tag could not be read (a failing or garbled `.sig`
    /// lookup), and `require` does not need it: why.
    Unverified(String),
}

impl SignatureStatus {
    /// As `hangar check` and `/healthz` show it.
    pub fn describe(&self) -> String {
        match self {
            SignatureStatus::NotChecked => "not checked".into(),
            SignatureStatus::Unsigned => "unsigned".into(),
            SignatureStatus::SignedBy(id) => format!("signed by {id}"),
            SignatureStatus::Invalid(why) => format!("invalid: {why}"),
            SignatureStatus::Unverified(why) => format!("not verified: {why}"),
        }
    }

    /// The id of the key that signed, if one did.
    pub fn key(&self) -> Option<&str> {
        match self {
            SignatureStatus::SignedBy(id) => Some(id),
            _ => None,
        }
    }
}

/// A signature beside the artifact: the payload and the raw signature.
pub(super) struct Signed {
    payload: Vec<u8>,
    signature: Vec<u8>,
}

/// Whether signatures are looked at for this config.
pub(super) fn checks_signatures(trust: &TrustConfig) -> bool {
    !trust.loaded.is_empty() || trust.require == Require::Signed
}

/// Whether a component is refused without a valid signature.
pub(super) fn requires_signature(trust: &TrustConfig) -> bool {
    trust.require == Require::Signed
}

/// Refuses an unpinned source under `require = "pinned"`.
pub(super) fn check_pinned(trust: &TrustConfig, pin: Option<&str>) -> Result<(), String> {
    if trust.require == Require::Pinned && pin.is_none() {
        return Err("not pinned: [trust] require = \"pinned\" needs digest = \"sha256:…\" or a reference @sha256:…".into());
    }
    Ok(())
}

/// Refuses what `require = "signed"` does not accept.
pub(super) fn enforce(trust: &TrustConfig, status: &SignatureStatus) -> Result<(), String> {
    if trust.require != Require::Signed {
        return Ok(());
    }
    match status {
        SignatureStatus::SignedBy(_) => Ok(()),
        SignatureStatus::Unsigned => {
            Err("unsigned: no cosign signature beside it, and [trust] require = \"signed\"".into())
        }
        SignatureStatus::Invalid(why) => Err(format!("signature refused: {why}")),
        SignatureStatus::Unverified(why) => Err(format!("signature not verified: {why}")),
        SignatureStatus::NotChecked => Err("signature not checked".into()),
    }
}

/// The reference of the signature tag for `digest`, in the source's repository.
fn signature_reference(source: &Source, digest: &str) -> Reference {
    let r = &source.reference;
    Reference::with_tag(
        r.registry().to_string(),
        r.repository().to_string(),
        signature_tag(digest),
    )
}

/// The signature layers of a signature manifest, with their decoded signatures.
fn signature_layers(raw: &[u8]) -> Result<Vec<(OciDescriptor, Vec<u8>)>, String> {
    let manifest: OciImageManifest = serde_json::from_slice(raw)
        .map_err(|e| format!("the signature tag is not an image manifest: {e}"))?;
    let mut out = Vec::new();
    for layer in manifest.layers {
        if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
            continue;
        }
        let Some(b64) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        else {
            continue;
        };
        let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else {
            continue;
        };
        check_digest_syntax(&layer.digest).map_err(|e| format!("signature layer: {e}"))?;
        if layer.size > MAX_PAYLOAD_BYTES || layer.size < 0 {
            return Err(format!(
                "signature payload of {} bytes is too large",
                layer.size
            ));
        }
        out.push((layer, sig));
    }
    Ok(out)
}

/// Fetches the signatures of `digest` from the registry, storing them in
/// the cache; `None` when there is no signature tag. The signature
/// manifest is read up to `MAX_MANIFEST_BYTES`, each payload up to its
/// declared size (at most `MAX_PAYLOAD_BYTES`), while they arrive.
pub(super) async fn fetch_signatures(
    registry: &Registry,
    store: &Store,
    source: &Source,
    digest: &str,
) -> Result<Option<Vec<Signed>>, PullError> {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode};
    let sig_ref = signature_reference(source, digest);
    let accepted = [OCI_IMAGE_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE];
    let tag = sig_ref.tag().unwrap_or_default().to_string();
    let raw = match registry.manifest(&sig_ref, &accepted).await {
        Ok(raw) => raw,
        Err(Failure::Http(E::ImageManifestNotFoundError(_)))
        | Err(Failure::Http(E::ServerError { code: 404, .. })) => {
            return Ok(None);
        }
        Err(Failure::Http(E::RegistryError { envelope, .. }))
            if envelope
                .errors
                .iter()
                .any(|e| e.code == OciErrorCode::ManifestUnknown) =>
        {
            return Ok(None);
        }
        Err(f) => {
            return Err(match registry.pull_error(&sig_ref, f) {
                PullError::Unreachable(e) => PullError::Unreachable(format!("signature: {e}")),
                PullError::Refused(e) => PullError::Refused(format!("signature tag {tag}: {e}")),
            });
        }
    };
    let layers = signature_layers(&raw).map_err(PullError::Refused)?;
    let mut out = Vec::new();
    for (layer, signature) in layers {
        let payload = match store.read(&layer.digest) {
            Some(bytes) => bytes,
            None => {
                let mut bytes = Vec::new();
                registry
                    .blob(
                        &sig_ref,
                        (&layer.digest, layer.size),
                        "signature payload",
                        &mut bytes,
                    )
                    .await
                    .map_err(|f| match f {
                        Failure::Refused(why) => PullError::Refused(why),
                        f => match registry.pull_error(&sig_ref, f) {
                            PullError::Unreachable(e) => {
                                PullError::Unreachable(format!("signature payload: {e}"))
                            }
                            PullError::Refused(e) => {
                                PullError::Refused(format!("signature payload: {e}"))
                            }
                        },
                    })?;
                store
                    .write(&layer.digest, &bytes)
                    .map_err(|e| PullError::Refused(format!("cannot store a signature: {e}")))?;
                bytes
            }
        };
        out.push(Signed { payload, signature });
    }
    let sig_digest = sha256(&raw);
    store
        .write(&sig_digest, &raw)
        .and_then(|_| store.remember(&sig_ref.whole(), &sig_digest))
        .map_err(|e| PullError::Refused(format!("cannot store a signature: {e}")))?;
    Ok(Some(out))
}

/// The signatures of `digest` kept in the cache; `None` when none were.
pub(super) fn cached_signatures(
    store: &Store,
    source: &Source,
    digest: &str,
) -> Option<Vec<Signed>> {
    let sig_ref = signature_reference(source, digest);
    let sig_digest = store.refs().get(&sig_ref.whole())?.clone();
    let raw = store.read(&sig_digest)?;
    let layers = signature_layers(&raw).ok()?;
    Some(
        layers
            .into_iter()
            .filter_map(|(layer, signature)| {
                Some(Signed {
                    payload: store.read(&layer.digest)?,
                    signature,
                })
            })
            .collect(),
    )
}

/// The verdict on `digest` given its signatures (`None`: no signature tag).
pub(super) fn judge(
    trust: &TrustConfig,
    digest: &str,
    signed: Option<&[Signed]>,
) -> SignatureStatus {
    if !checks_signatures(trust) {
        return SignatureStatus::NotChecked;
    }
    let Some(signed) = signed.filter(|s| !s.is_empty()) else {
        return SignatureStatus::Unsigned;
    };
    let mut elsewhere = None;
    for s in signed {
        for key in &trust.loaded {
            if !key.verifies(&s.payload, &s.signature) {
                continue;
            }
            match signed_digest(&s.payload) {
                Ok(d) if d == digest => return SignatureStatus::SignedBy(key.id.clone()),
                Ok(d) => {
                    elsewhere = Some(format!(
                        "the signature by {} covers {d}, not the served {digest} (the tag moved?)",
                        key.id
                    ))
                }
                Err(e) => elsewhere = Some(format!("the signature by {}: {e}", key.id)),
            }
        }
    }
    SignatureStatus::Invalid(elsewhere.unwrap_or_else(|| {
        let ids: Vec<&str> = trust.loaded.iter().map(|k| k.id.as_str()).collect();
        format!(
            "{} signature(s), none by a trusted key ({})",
            signed.len(),
            if ids.is_empty() {
                "no keys in [trust]".to_string()
            } else {
                ids.join(", ")
            }
        )
    }))
}
