//! `hangar token`: personal tokens made, listed and revoked from the
//! command line, in the config's kv store (so beside a running server: the
//! embedded SQLite is shared by file, Redis by address).

use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Map, Value};

use super::tokens::{self, TokenRecord, Tokens};
use hangar_config::Config;

/// What `hangar token` does.
#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Makes a token for SUBJECT and prints it (once: only its digest is kept).
    Create {
        subject: String,
        /// A claim of the token's principal, `name=value` (the value read as
        /// JSON when it is a number, `true`/`false`, an array or an object).
        #[arg(long = "claim", value_name = "NAME=VALUE")]
        claims: Vec<String>,
        /// How long it is good for (`30d`, `12h`); without it, until revoked.
        #[arg(long, value_parser = humantime_serde::re::humantime::parse_duration)]
        expires: Option<Duration>,
    },
    /// Lists the live tokens, without secrets.
    List {
        /// One JSON array instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Revokes SUBJECT's tokens (only the one named by `--id`, when given).
    Revoke {
        subject: String,
        #[arg(long)]
        id: Option<String>,
    },
}

impl TokenCommand {
    pub async fn run(self, config: &Config) -> anyhow::Result<ExitCode> {
        let (kv, problems) = crate::kv::open(&config.kv, &config.server.cache_dir, None).await;
        if kv.is_none() {
            anyhow::bail!("the kv store did not open: {}", problems.join("; "));
        }
        let tokens = Tokens::new(kv);
        match self {
            TokenCommand::Create {
                subject,
                claims,
                expires,
            } => {
                let claims = claims
                    .iter()
                    .map(|c| tokens::claim(c))
                    .collect::<Result<Map<String, Value>, String>>()
                    .map_err(|e| anyhow::anyhow!(e))?;
                let (token, record) = (tokens.create(&subject, claims, expires).await)
                    .map_err(|e| anyhow::anyhow!("creating the token: {e}"))?;
                println!("{token}");
                eprintln!(
                    "created token {} for {subject} ({})",
                    record.id,
                    expiry(&record)
                );
            }
            TokenCommand::List { json } => {
                let listed = (tokens.list().await).map_err(|e| anyhow::anyhow!(e))?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&listed)?);
                } else {
                    for r in &listed {
                        println!(
                            "{}  {}  created {}  {}  {}",
                            r.id,
                            r.subject,
                            when(r.created),
                            expiry(r),
                            Value::Object(r.claims.clone())
                        );
                    }
                    eprintln!("{} token(s)", listed.len());
                }
            }
            TokenCommand::Revoke { subject, id } => {
                let revoked = (tokens.revoke(&subject, id.as_deref()).await)
                    .map_err(|e| anyhow::anyhow!(e))?;
                println!("revoked {} token(s) of {subject}", revoked.len());
                if revoked.is_empty() {
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

fn when(unix: u64) -> String {
    humantime_serde::re::humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + Duration::from_secs(unix),
    )
    .to_string()
}

fn expiry(r: &TokenRecord) -> String {
    match r.expires {
        Some(at) => format!("expires {}", when(at)),
        None => "never expires".into(),
    }
}
