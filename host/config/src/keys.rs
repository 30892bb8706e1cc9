//! The public keys `[trust] keys` names, read when the config is loaded:
//! PEM PKIX public keys (ECDSA P-256, Ed25519, RSA), as cosign's
//! `cosign.pub`. They live in config so that a bad key file is a config
//! error and config names nothing above it; `registry` checks signatures
//! with them.

use std::path::Path;

use p256::ecdsa::signature::Verifier;
use p256::pkcs8::DecodePublicKey;
use sha2::{Digest, Sha256};

/// A public key signatures are checked against, with the id `hangar check`
/// shows: the file name and the start of the SHA-256 of its SPKI DER.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    pub id: String,
    key: PublicKey,
}

#[derive(Debug, Clone)]
enum PublicKey {
    /// ECDSA P-256 with SHA-256 (cosign's default), DER signatures.
    P256(p256::ecdsa::VerifyingKey),
    Ed25519(ed25519_dalek::VerifyingKey),
    /// RSA PKCS#1 v1.5 with SHA-256, as cosign verifies RSA keys.
    Rsa(rsa::pkcs1v15::VerifyingKey<Sha256>),
}

impl TrustedKey {
    /// Reads a PEM `PUBLIC KEY` file (ECDSA P-256, Ed25519 or RSA).
    pub fn load(path: &Path) -> Result<TrustedKey, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        TrustedKey::from_pem(&name, &text)
    }

    pub fn from_pem(name: &str, text: &str) -> Result<TrustedKey, String> {
        let (label, doc) =
            spki::Document::from_pem(text).map_err(|e| format!("not a PEM public key: {e}"))?;
        if label != "PUBLIC KEY" {
            return Err(format!(
                "a PEM \"PUBLIC KEY\" is expected (as cosign.pub), found {label:?}"
            ));
        }
        let der = doc.as_bytes();
        let key = if let Ok(k) = p256::ecdsa::VerifyingKey::from_public_key_der(der) {
            PublicKey::P256(k)
        } else if let Ok(k) = ed25519_dalek::VerifyingKey::from_public_key_der(der) {
            PublicKey::Ed25519(k)
        } else if let Ok(k) = rsa::RsaPublicKey::from_public_key_der(der) {
            PublicKey::Rsa(rsa::pkcs1v15::VerifyingKey::new(k))
        } else {
            return Err("not an ECDSA P-256, Ed25519 or RSA public key".into());
        };
        let fingerprint = hex::encode(Sha256::digest(der));
        Ok(TrustedKey {
            id: format!("{name} (SHA256:{})", &fingerprint[..16]),
            key,
        })
    }

    /// Whether `signature` (raw bytes, decoded from base64) is this key's
    /// over `payload`.
    pub fn verifies(&self, payload: &[u8], signature: &[u8]) -> bool {
        match &self.key {
            PublicKey::P256(k) => p256::ecdsa::Signature::from_der(signature)
                .or_else(|_| p256::ecdsa::Signature::from_slice(signature))
                .is_ok_and(|s| k.verify(payload, &s).is_ok()),
            PublicKey::Ed25519(k) => ed25519_dalek::Signature::from_slice(signature)
                .is_ok_and(|s| k.verify(payload, &s).is_ok()),
            PublicKey::Rsa(k) => rsa::pkcs1v15::Signature::try_from(signature)
                .is_ok_and(|s| k.verify(payload, &s).is_ok()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_key_files_say_why() {
        let e = TrustedKey::from_pem("k", "not pem").unwrap_err();
        assert!(e.contains("not a PEM public key"), "{e}");
        use p256::pkcs8::{EncodePrivateKey, LineEnding};
        let private = p256::SecretKey::from_slice(&[7u8; 32])
            .unwrap()
            .to_pkcs8_pem(LineEnding::LF)
            .unwrap();
        let e = TrustedKey::from_pem("k", &private).unwrap_err();
        assert!(e.contains("PUBLIC KEY"), "{e}");
    }
}
