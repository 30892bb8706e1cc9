//! `jwt`: lets a call through with a valid bearer token (HS256, RS256, ES256).
//!
//! Plugin config: `hs256_secret` (at least 32 bytes: a shorter secret is
//! refused, so HS256 tokens are then never accepted), and/or `public_key_pem`
//! (RSA or EC public key for RS256/ES256); values may be `{{ env.VAR }}`.
//! Policy: `audience` (required: the `aud` tokens must carry, or `"any"` to
//! accept any audience — a token minted for another service is otherwise
//! good here too, so skipping the check must be written down), `issuer`,
//! `algorithms` (default all configured), `header` (default `authorization`,
//! `Bearer <token>`), `leeway_secs` (default 0).
//! `exp` is required and checked, `nbf` when present; `sub` must be a
//! non-empty string (it is the principal's subject: sessions, file areas and
//! rate limits belong to it); verification is jsonwebtoken's (RustCrypto
//! backend).

use hangar_sdk::auth::{AuthError, Guest, Principal, RequestContext, config};
use hangar_sdk::serde_json::{self, Value};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};

struct Jwt;

fn deny(reason: impl Into<String>) -> AuthError {
    AuthError {
        message: reason.into(),
    }
}

/// The shortest HS256 secret accepted: as many bytes as the hash gives.
const MIN_HS256_SECRET: usize = 32;

fn key_for(alg: Algorithm) -> Result<DecodingKey, AuthError> {
    let missing = |what: &str| deny(format!("{alg:?} tokens need `{what}` in the plugin config"));
    match alg {
        Algorithm::HS256 => {
            let secret = config("hs256_secret").ok_or_else(|| missing("hs256_secret"))?;
            if secret.len() < MIN_HS256_SECRET {
                return Err(deny(format!(
                    "hs256_secret is {} bytes; at least {MIN_HS256_SECRET} are needed",
                    secret.len()
                )));
            }
            Ok(DecodingKey::from_secret(secret.as_bytes()))
        }
        Algorithm::RS256 => DecodingKey::from_rsa_pem(
            config("public_key_pem")
                .ok_or_else(|| missing("public_key_pem"))?
                .as_bytes(),
        )
        .map_err(|e| deny(format!("bad RSA key: {e}"))),
        Algorithm::ES256 => DecodingKey::from_ec_pem(
            config("public_key_pem")
                .ok_or_else(|| missing("public_key_pem"))?
                .as_bytes(),
        )
        .map_err(|e| deny(format!("bad EC key: {e}"))),
        other => Err(deny(format!("algorithm {other:?} is not accepted"))),
    }
}

impl Guest for Jwt {
    fn authenticate(ctx: RequestContext, policy: String) -> Result<Principal, AuthError> {
        let policy: Value = serde_json::from_str(&policy).unwrap_or(Value::Null);
        let header = policy
            .get("header")
            .and_then(Value::as_str)
            .unwrap_or("authorization")
            .to_ascii_lowercase();
        let raw = ctx
            .headers
            .iter()
            .find(|(n, _)| *n == header)
            .map(|(_, v)| v.trim())
            .ok_or_else(|| deny(format!("no {header} header")))?;
        let token = raw
            .strip_prefix("Bearer ")
            .or_else(|| raw.strip_prefix("bearer "))
            .unwrap_or(raw);
        // Before the token is looked at: a policy without an audience
        // refuses every token rather than accept any audience by default.
        let audience = match policy.get("audience").and_then(Value::as_str) {
            Some("any") => None,
            Some(aud) if !aud.is_empty() => Some(aud),
            _ => {
                return Err(deny(
                    "the jwt policy names no audience: set audience = \"<expected aud>\" (or \"any\")",
                ));
            }
        };
        let alg = decode_header(token)
            .map_err(|e| deny(format!("malformed token: {e}")))?
            .alg;
        let allowed: Vec<String> = policy
            .get("algorithms")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_else(|| vec!["HS256".into(), "RS256".into(), "ES256".into()]);
        if !allowed.iter().any(|a| a == &format!("{alg:?}")) {
            return Err(deny(format!("algorithm {alg:?} not allowed by policy")));
        }
        let mut validation = Validation::new(alg);
        validation.leeway = policy
            .get("leeway_secs")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp"]);
        if let Some(iss) = policy.get("issuer").and_then(Value::as_str) {
            validation.set_issuer(&[iss]);
        }
        match audience {
            Some(aud) => validation.set_audience(&[aud]),
            None => validation.validate_aud = false,
        }
        let data = decode::<Value>(token, &key_for(alg)?, &validation)
            .map_err(|e| deny(format!("invalid token: {e}")))?;
        let subject = data
            .claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| deny("the token names no subject (sub)"))?
            .to_string();
        Ok(Principal {
            subject,
            claims: data.claims.to_string(),
        })
    }
}

hangar_sdk::export_auth!(Jwt);
