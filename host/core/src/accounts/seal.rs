//! `Sealer`: AES-256-GCM over each user's stored connection (ring's AEAD,
//! the crate rustls already links), so the kv store's rows, a Redis dump or
//! a copied SQLite file hold no usable token.
//!
//! Each value gets a fresh random 96-bit nonce. The associated data names
//! the row (provider and subject): a sealed value moved to another user's
//! row does not open there.

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// The first byte of a sealed value: the format, so a later one can differ.
const VERSION: u8 = 1;

/// Seals and opens values under `[credentials] encryption_key`.
pub struct Sealer {
    key: LessSafeKey,
    random: SystemRandom,
}

impl Sealer {
    pub fn new(key: &[u8; 32]) -> Sealer {
        Sealer {
            key: LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("32 bytes")),
            random: SystemRandom::new(),
        }
    }

    /// `plain` sealed, bound to `row`: version, nonce, ciphertext and tag.
    pub fn seal(&self, row: &str, plain: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .expect("the system's random source answers");
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(row.as_bytes()),
                &mut sealed,
            )
            .expect("sealing a value in memory cannot fail");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// The value sealed for `row`; `None` when it was sealed under another
    /// key, for another row, or was changed.
    pub fn open(&self, row: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        let (&version, rest) = sealed.split_first()?;
        if version != VERSION || rest.len() < NONCE_LEN {
            return None;
        }
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(row.as_bytes()), &mut body)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// `n` random bytes from the system's source, URL-safe base64 (tickets,
/// flow states, PKCE verifiers, browser cookies).
pub fn random_token(n: usize) -> String {
    use base64::Engine as _;
    let mut bytes = vec![0u8; n];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source answers");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_for_its_row_under_its_key() {
        let sealer = Sealer::new(&[7; 32]);
        let sealed = sealer.seal("notes/alice", b"secret-token");
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_eq!(
            sealer.open("notes/alice", &sealed).unwrap(),
            b"secret-token"
        );
        // Another row, another key, a flipped bit, a truncation: nothing.
        assert!(sealer.open("notes/bob", &sealed).is_none());
        assert!(Sealer::new(&[8; 32]).open("notes/alice", &sealed).is_none());
        let mut flipped = sealed.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(sealer.open("notes/alice", &flipped).is_none());
        assert!(sealer.open("notes/alice", &sealed[..5]).is_none());
        assert!(sealer.open("notes/alice", &[]).is_none());
        // A fresh nonce each time: the same value seals differently.
        assert_ne!(sealer.seal("r", b"x"), sealer.seal("r", b"x"));
    }

    #[test]
    fn random_tokens_differ_and_are_url_safe() {
        let (a, b) = (random_token(32), random_token(32));
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
    }
}
