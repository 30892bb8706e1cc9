//! Checking one bearer token: its shape, its signature against the issuer's
//! keys, and its claims (`iss`, `aud`, `exp`, `nbf`) — with `jsonwebtoken`,
//! natively in the host. What a token proves becomes a [`Principal`]; the
//! token itself goes no further.

use jsonwebtoken::errors::ErrorKind as JwtError;
use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
use serde_json::{Map, Value};

use super::jwks::Key;
use hangar_config::OAuthConfig;
use hangar_core::call::Principal;

/// Algorithms accepted: asymmetric only (an HMAC token could be forged by
/// anyone holding a shared secret, and resource servers hold none).
pub const ALGORITHMS: [Algorithm; 7] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why a token was refused; the text goes into `error_description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

/// The header fields needed to pick a key, or why the token is malformed.
pub fn key_hint(token: &str) -> Result<(Algorithm, Option<String>), Invalid> {
    let header = decode_header(token).map_err(|_| Invalid("malformed token".into()))?;
    if !ALGORITHMS.contains(&header.alg) {
        return Err(Invalid(format!(
            "algorithm {:?} is not accepted",
            header.alg
        )));
    }
    Ok((header.alg, header.kid))
}

/// Whether a key can verify `alg` (its family, and its `alg` when it names one).
fn fits(key: &Key, alg: Algorithm) -> bool {
    let family = match alg {
        Algorithm::ES256 | Algorithm::ES384 => "EC",
        Algorithm::EdDSA => "OKP",
        _ => "RSA",
    };
    key.kty == family && key.alg.as_deref().is_none_or(|a| a == format!("{alg:?}"))
}

/// Verifies `token` against `keys` and `config`; the principal's subject is
/// `sub` (else `client_id`, else `azp`), its claims every claim. A token
/// that names no subject is refused: sessions and file areas belong to a
/// subject, and every such token would share the empty one.
pub fn verify(
    token: &str,
    alg: Algorithm,
    keys: &[Key],
    config: &OAuthConfig,
) -> Result<Principal, Invalid> {
    let mut validation = Validation::new(alg);
    validation.set_issuer(&[config.issuer.as_str()]);
    validation.set_audience(&[config.expected_audience()]);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.leeway = config.leeway.as_secs();
    validation.validate_nbf = true;
    let candidates: Vec<&Key> = keys.iter().filter(|k| fits(k, alg)).collect();
    if candidates.is_empty() {
        return Err(Invalid(
            "no signing key of the issuer matches the token".into(),
        ));
    }
    let mut last = Invalid("invalid signature".into());
    for key in candidates {
        match decode::<Map<String, Value>>(token, &key.key, &validation) {
            Ok(data) => return principal(data.claims),
            Err(e) => {
                last = describe(e.kind());
                if *e.kind() != JwtError::InvalidSignature {
                    // The signature held (or the token is broken): another key won't help.
                    break;
                }
            }
        }
    }
    Err(last)
}

fn describe(kind: &JwtError) -> Invalid {
    Invalid(
        match kind {
            JwtError::ExpiredSignature => "token expired",
            JwtError::ImmatureSignature => "token not yet valid",
            JwtError::InvalidIssuer => "wrong issuer",
            JwtError::InvalidAudience => "wrong audience",
            JwtError::InvalidSignature => "invalid signature",
            JwtError::MissingRequiredClaim(_) => "a required claim (exp, iss, aud) is missing",
            JwtError::InvalidAlgorithm => "the algorithm does not fit the key",
            _ => "malformed token",
        }
        .to_string(),
    )
}

/// The principal of verified claims. A `sub` that is there must be a
/// non-empty string; without one, `client_id` or `azp` names the client.
fn principal(claims: Map<String, Value>) -> Result<Principal, Invalid> {
    let named = |c: &str| claims.get(c).map(|v| v.as_str().unwrap_or_default());
    let subject = match named("sub") {
        Some(sub) => sub,
        None => named("client_id")
            .or_else(|| named("azp"))
            .unwrap_or_default(),
    };
    if subject.is_empty() {
        return Err(Invalid("the token names no subject (sub)".into()));
    }
    Ok(Principal::new(subject.to_string(), Value::Object(claims)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode};
    use serde_json::json;

    // A fixed Ed25519 test key pair (private PKCS #8 PEM, public `x`).
    const PRIVATE_PEM: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAIcrn9g\n-----END PRIVATE KEY-----\n";
    const PUBLIC_X: &str = "cJ8zVWK5EjFkXfjJnnDQ2lWix1dJwOEvY9OaezasfT8";

    fn config() -> OAuthConfig {
        let text = r#"
            [oauth]
            issuer = "https://as.example.com"
            resource = "https://tools.example.com/mcp"
            leeway = "0s"
        "#;
        hangar_config::Config::parse(text).unwrap().oauth.unwrap()
    }

    fn keys() -> Vec<Key> {
        super::super::jwks::parse_keys(
            &json!({ "keys": [{ "kty": "OKP", "crv": "Ed25519", "kid": "k1", "x": PUBLIC_X }] }),
        )
        .unwrap()
    }

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    fn sign(claims: Value) -> String {
        let key = EncodingKey::from_ed_pem(PRIVATE_PEM.as_bytes()).unwrap();
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("k1".into());
        encode(&header, &claims, &key).unwrap()
    }

    fn good() -> Value {
        json!({
            "iss": "https://as.example.com",
            "aud": "https://tools.example.com/mcp",
            "sub": "alice",
            "exp": now() + 300,
            "scope": "tools:read tools:admin",
        })
    }

    fn check(claims: Value) -> Result<Principal, Invalid> {
        let token = sign(claims);
        let (alg, kid) = key_hint(&token)?;
        assert_eq!(kid.as_deref(), Some("k1"));
        verify(&token, alg, &keys(), &config())
    }

    #[test]
    fn a_good_token_gives_its_subject_claims_and_scopes() {
        let p = check(good()).unwrap();
        assert_eq!(p.subject, "alice");
        assert_eq!(p.claims["scope"], "tools:read tools:admin");
    }

    #[test]
    fn each_bad_claim_has_its_reason() {
        let with = |k: &str, v: Value| {
            let mut c = good();
            c[k] = v;
            check(c).unwrap_err().0
        };
        assert_eq!(with("exp", json!(now() - 10)), "token expired");
        assert_eq!(with("nbf", json!(now() + 300)), "token not yet valid");
        assert_eq!(
            with("iss", json!("https://evil.example.com")),
            "wrong issuer"
        );
        assert_eq!(
            with("aud", json!("https://other.example.com")),
            "wrong audience"
        );
        let mut c = good();
        c.as_object_mut().unwrap().remove("aud");
        assert!(check(c).unwrap_err().0.contains("missing"));
    }

    #[test]
    fn a_token_without_a_subject_is_refused() {
        let with_sub = |sub: Option<Value>, client: Option<&str>| {
            let mut c = good();
            let o = c.as_object_mut().unwrap();
            o.remove("sub");
            if let Some(sub) = sub {
                o.insert("sub".into(), sub);
            }
            if let Some(client) = client {
                o.insert("client_id".into(), json!(client));
            }
            check(c).map(|p| p.subject)
        };
        let refused = Err(Invalid("the token names no subject (sub)".into()));
        assert_eq!(with_sub(Some(json!("")), None), refused);
        assert_eq!(with_sub(Some(json!("")), Some("app")), refused);
        assert_eq!(with_sub(Some(json!(42)), None), refused);
        assert_eq!(with_sub(None, None), refused);
        assert_eq!(with_sub(None, Some("")), refused);
        // No `sub` at all: the client is the subject, as before.
        assert_eq!(with_sub(None, Some("app")), Ok("app".to_string()));
    }

    #[test]
    fn a_tampered_or_malformed_token_is_refused() {
        let token = sign(good());
        let mut parts: Vec<&str> = token.split('.').collect();
        let other = sign(json!({ "sub": "mallory", "exp": now() + 300 }));
        parts[1] = other.split('.').nth(1).unwrap();
        let forged = parts.join(".");
        assert_eq!(
            verify(&forged, Algorithm::EdDSA, &keys(), &config())
                .unwrap_err()
                .0,
            "invalid signature"
        );
        assert_eq!(key_hint("not-a-token").unwrap_err().0, "malformed token");
    }

    #[test]
    fn hmac_tokens_are_not_accepted() {
        let token = encode(
            &Header::new(Algorithm::HS256),
            &good(),
            &EncodingKey::from_secret(b"0123456789abcdef0123456789abcdef"),
        )
        .unwrap();
        assert!(key_hint(&token).unwrap_err().0.contains("not accepted"));
    }
}
