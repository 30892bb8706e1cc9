//! An `oci://` source, its digest pin, and digests of bytes.

use super::*;

/// A parsed `oci://` source.
pub(super) struct Source {
    pub(super) reference: Reference,
    /// The digest the reference itself names (`…@sha256:…`).
    pub(super) by_digest: Option<String>,
}

pub(super) fn parse_source(source: &str) -> Result<Source, String> {
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

pub(super) fn check_digest_syntax(digest: &str) -> Result<(), String> {
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

pub(super) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The pin a source must resolve to: `digest`, the reference's own
/// `@sha256:…`, or none; refused when the two disagree.
pub(super) fn pin_of(source: &Source, digest: Option<&str>) -> Result<Option<String>, String> {
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
