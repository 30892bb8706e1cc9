//! TLS for the Postgres connector, with rustls: libpq's `sslmode` values,
//! the system's root certificates plus an optional CA file.
//!
//! tokio-postgres itself knows only `disable`, `prefer` and `require` (and
//! checks no certificate): the URL's `sslmode` and `sslrootcert` are taken
//! out here and turned into a rustls configuration.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`, less `allow` (plain first, TLS if refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it, certificate not checked.
    Prefer,
    /// TLS or no connection; the certificate is checked against the CA
    /// file only when one is given (as libpq does).
    Require,
    /// TLS, the certificate signed by a trusted CA.
    VerifyCa,
    /// TLS, the certificate signed by a trusted CA and naming the host.
    VerifyFull,
}

impl SslMode {
    pub fn parse(text: &str) -> Result<SslMode, String> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode {other:?} is not one of disable, prefer, require, verify-ca, verify-full"
                ));
            }
        })
    }

    /// What tokio-postgres is told: whether to ask for TLS, and insist.
    pub fn negotiation(self) -> tokio_postgres::config::SslMode {
        match self {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        }
    }
}

/// The TLS parameters of a connection URL, and the URL without them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UrlTls {
    pub rest: String,
    pub sslmode: Option<String>,
    pub sslrootcert: Option<String>,
}

/// Takes `sslmode` and `sslrootcert` out of a `postgres://` URL's query or
/// a `key=value` connection string.
pub fn split_url(url: &str) -> UrlTls {
    let mut out = UrlTls::default();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            out.rest = url.to_string();
            return out;
        };
        // Other parameters are kept exactly as written.
        let mut kept = Vec::new();
        for segment in query.split('&') {
            let pair = form_urlencoded::parse(segment.as_bytes()).next();
            match pair {
                Some((key, value)) if key == "sslmode" => out.sslmode = Some(value.into_owned()),
                Some((key, value)) if key == "sslrootcert" => {
                    out.sslrootcert = Some(value.into_owned())
                }
                _ if segment.is_empty() => {}
                _ => kept.push(segment),
            }
        }
        out.rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return out;
    }
    // key=value pairs; a value may be quoted ('a b'), with \' and \\ inside.
    let mut kept = Vec::new();
    let mut chars = url.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next_if_eq(&'=').is_none() {
            // Not a pair: left for tokio-postgres to report.
            kept.push(key);
            continue;
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let (mut raw, mut value) = (String::new(), String::new());
        let quoted = chars.next_if_eq(&'\'').is_some();
        if quoted {
            raw.push('\'');
        }
        while let Some(c) = chars.next() {
            if !quoted && c.is_whitespace() {
                break;
            }
            raw.push(c);
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        raw.push(next);
                        value.push(next);
                    }
                }
                '\'' if quoted => break,
                c => value.push(c),
            }
        }
        match key.as_str() {
            "sslmode" => out.sslmode = Some(value),
            "sslrootcert" => out.sslrootcert = Some(value),
            _ => kept.push(format!("{key}={raw}")),
        }
    }
    out.rest = kept.join(" ");
    out
}

/// The rustls connector for `mode`: the system's roots plus `ca_file`'s
/// certificates (PEM).
pub fn connector(mode: SslMode, ca_file: Option<&Path>) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are skipped, as every client does.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(path) = ca_file {
        for cert in read_pem(path)? {
            roots
                .add(cert)
                .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        }
    }
    let roots = Arc::new(roots);
    let webpki = || {
        WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| format!("TLS set-up: {e}"))
    };
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, ca_file) {
        (SslMode::VerifyFull, _) => webpki()?,
        (SslMode::VerifyCa, _) | (SslMode::Require, Some(_)) => Arc::new(Lenient {
            chain: Some(webpki()?),
            provider: provider.clone(),
        }),
        (SslMode::Disable | SslMode::Prefer | SslMode::Require, _) => Arc::new(Lenient {
            chain: None,
            provider: provider.clone(),
        }),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn read_pem(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("ca_file {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

/// The CA file a connector uses: its own setting, else the URL's.
pub fn ca_file(configured: Option<&Path>, from_url: Option<&str>) -> Option<PathBuf> {
    configured
        .map(Path::to_path_buf)
        .or_else(|| from_url.filter(|p| !p.is_empty()).map(PathBuf::from))
}

/// The verifier of the modes that check less than `verify-full`: for
/// `verify-ca` (and `require` with a CA file) the chain must lead to a
/// trusted root but the name is not checked; for `prefer` and `require`
/// without one the certificate is not checked at all (libpq's behaviour).
/// Either way the handshake's signatures are.
#[derive(Debug)]
struct Lenient {
    /// Checks the chain; `None`: the certificate is taken as it is.
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_query_loses_only_the_tls_parameters() {
        let t = split_url(
            "postgres://u:p@db:5432/app?application_name=a%20b&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        );
        assert_eq!(t.rest, "postgres://u:p@db:5432/app?application_name=a%20b");
        assert_eq!(t.sslmode.as_deref(), Some("verify-full"));
        assert_eq!(t.sslrootcert.as_deref(), Some("/etc/ca.pem"));
        let t = split_url("postgresql://db/app?sslmode=require");
        assert_eq!(t.rest, "postgresql://db/app");
        assert_eq!(t.sslmode.as_deref(), Some("require"));
        assert_eq!(split_url("postgres://db/app").rest, "postgres://db/app");
    }

    #[test]
    fn key_value_strings_lose_only_the_tls_parameters() {
        let t = split_url(
            "host = db  password='a b\\'c' sslmode=verify-ca user=u sslrootcert='/x y.pem'",
        );
        assert_eq!(t.rest, "host=db password='a b\\'c' user=u");
        assert_eq!(t.sslmode.as_deref(), Some("verify-ca"));
        assert_eq!(t.sslrootcert.as_deref(), Some("/x y.pem"));
        let parsed: tokio_postgres::Config = t.rest.parse().unwrap();
        assert_eq!(parsed.get_password(), Some(&b"a b'c"[..]));
    }

    #[test]
    fn modes_parse_and_unknown_ones_are_named() {
        assert_eq!(SslMode::parse("verify-full"), Ok(SslMode::VerifyFull));
        assert_eq!(
            SslMode::Require.negotiation(),
            tokio_postgres::config::SslMode::Require
        );
        let e = SslMode::parse("allow").unwrap_err();
        assert!(e.contains("\"allow\""), "{e}");
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let path = std::env::temp_dir().join(format!("hangar-empty-ca-{}", std::process::id()));
        std::fs::write(&path, "not a certificate\n").unwrap();
        let e = connector(SslMode::VerifyFull, Some(&path)).err().unwrap();
        assert!(e.contains("no certificate"), "{e}");
        std::fs::remove_file(&path).unwrap();
        assert!(connector(SslMode::Prefer, None).is_ok());
    }
}
