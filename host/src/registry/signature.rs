//! cosign's key-based signatures: the signing keys (PEM PKCS#8 private
//! keys; the public keys are config's `TrustedKey`), the simple-signing payload, and checking or making
//! a signature over it. RustCrypto's kept crates (`p256`, `ed25519-dalek`,
//! `rsa`, `spki`, `pkcs8`) do the crypto; they are the ones the OAuth
//! token check already links, so no second crypto stack comes along (the
//! `sigstore` crate's cosign feature brings its own oci-client and TLS).

use std::path::Path;

use p256::ecdsa::signature::Signer;
use p256::pkcs8::DecodePrivateKey;
use serde_json::{Value, json};

/// The media type of a signature layer: the simple-signing payload.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature over the payload.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `critical.type` of a cosign image signature.
const SIGNATURE_TYPE: &str = "cosign container image signature";

/// A private key `hangar push --sign` signs with: PEM PKCS#8 (`openssl
/// genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`, or
/// `-algorithm ed25519`).
pub enum SigningKey {
    P256(p256::ecdsa::SigningKey),
    Ed25519(ed25519_dalek::SigningKey),
}

impl SigningKey {
    pub fn load(path: &Path) -> Result<SigningKey, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let bad = |why: &str| format!("{}: {why}", path.display());
        if text.contains("ENCRYPTED SIGSTORE PRIVATE KEY") {
            return Err(bad(
                "cosign's encrypted key format is not read; use a PEM PKCS#8 \"PRIVATE KEY\" (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)",
            ));
        }
        if let Ok(k) = p256::SecretKey::from_pkcs8_pem(&text) {
            return Ok(SigningKey::P256(k.into()));
        }
        if let Ok(k) = p256::SecretKey::from_sec1_pem(&text) {
            return Ok(SigningKey::P256(k.into()));
        }
        if let Ok(k) = ed25519_dalek::SigningKey::from_pkcs8_pem(&text) {
            return Ok(SigningKey::Ed25519(k));
        }
        Err(bad(
            "not a PEM PKCS#8 ECDSA P-256 or Ed25519 private key (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)",
        ))
    }

    /// The signature over `payload`, as cosign stores it (DER for ECDSA).
    pub fn sign(&self, payload: &[u8]) -> Vec<u8> {
        match self {
            SigningKey::P256(k) => {
                let s: p256::ecdsa::Signature = k.sign(payload);
                s.to_der().as_bytes().to_vec()
            }
            SigningKey::Ed25519(k) => k.sign(payload).to_bytes().to_vec(),
        }
    }
}

/// The simple-signing payload cosign signs for `digest` of `docker_reference`
/// (`host:port/repository`).
pub fn payload(docker_reference: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "critical": {
            "identity": {"docker-reference": docker_reference},
            "image": {"docker-manifest-digest": digest},
            "type": SIGNATURE_TYPE,
        },
        "optional": null,
    }))
    .expect("a JSON value serializes")
}

/// The manifest digest a payload signs, when it is a cosign image signature.
pub fn signed_digest(payload: &[u8]) -> Result<String, String> {
    let v: Value = serde_json::from_slice(payload)
        .map_err(|e| format!("the signed payload is not JSON: {e}"))?;
    let critical = &v["critical"];
    if critical["type"] != SIGNATURE_TYPE {
        return Err(format!(
            "the signed payload's type is {}, not {SIGNATURE_TYPE:?}",
            critical["type"]
        ));
    }
    critical["image"]["docker-manifest-digest"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| "the signed payload names no docker-manifest-digest".into())
}

/// The tag cosign stores the signatures of `digest` under.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replace(':', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_config::TrustedKey;

    #[test]
    fn a_signature_verifies_only_with_its_key_and_payload() {
        use p256::pkcs8::{EncodePublicKey, LineEnding};
        let secret = p256::SecretKey::from_slice(&[7u8; 32]).unwrap();
        let signer = SigningKey::P256(secret.clone().into());
        let pem = secret
            .public_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap();
        let key = TrustedKey::from_pem("team.pub", &pem).unwrap();
        assert!(key.id.starts_with("team.pub (SHA256:"), "{}", key.id);
        let d = format!("sha256:{}", "a".repeat(64));
        let body = payload("127.0.0.1:5000/tools/echo", &d);
        let sig = signer.sign(&body);
        assert!(key.verifies(&body, &sig));
        assert!(!key.verifies(&payload("127.0.0.1:5000/tools/echo", "sha256:0"), &sig));
        let other = p256::SecretKey::from_slice(&[9u8; 32]).unwrap();
        let other_pem = other
            .public_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap();
        assert!(
            !TrustedKey::from_pem("other.pub", &other_pem)
                .unwrap()
                .verifies(&body, &sig)
        );
        assert_eq!(signed_digest(&body).unwrap(), d);
        assert_eq!(signature_tag(&d), format!("sha256-{}.sig", "a".repeat(64)));
    }
}
