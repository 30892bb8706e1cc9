//! Download URLs of artifacts: signed with the server's key (HMAC-SHA256)
//! and good until they expire.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::names::{Area, percent_encode};
use super::refusal::DownloadRefusal;
use super::{Entry, Files};

impl Files {
    /// The path and query of a download URL for `entry`, good for `url_ttl`.
    pub fn download_path(&self, entry: &Entry) -> String {
        let expires = unix_now() + self.url_ttl.as_secs().max(1);
        let sig = self.sign(entry.area.as_str(), &entry.id, &entry.name, expires);
        format!(
            "/artifacts/{}/{}/{}?expires={expires}&sig={sig}",
            entry.area.as_str(),
            entry.id,
            percent_encode(&entry.name)
        )
    }

    /// An absolute download URL: `public_url`, or `http://` and `host`.
    pub fn download_url(&self, entry: &Entry, host: Option<&str>) -> String {
        let path = self.download_path(entry);
        match (&self.public_url, host) {
            (Some(base), _) => format!("{base}{path}"),
            (None, Some(host)) => format!("http://{host}{path}"),
            (None, None) => path,
        }
    }

    pub(super) fn sign(&self, area: &str, id: &str, name: &str, expires: u64) -> String {
        hex::encode(self.mac(area, id, name, expires).finalize().into_bytes())
    }

    fn mac(&self, area: &str, id: &str, name: &str, expires: u64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key size");
        mac.update(format!("{area}/{id}/{name}\n{expires}").as_bytes());
        mac
    }

    /// The artifact a download URL names, when its signature is right and
    /// it has not expired.
    pub fn verify_download(
        &self,
        area: &str,
        id: &str,
        name: &str,
        expires: u64,
        sig: &str,
    ) -> Result<Arc<Entry>, DownloadRefusal> {
        let sig = hex::decode(sig).map_err(|_| DownloadRefusal::BadSignature)?;
        self.mac(area, id, name, expires)
            .verify_slice(&sig)
            .map_err(|_| DownloadRefusal::BadSignature)?;
        if unix_now() > expires {
            return Err(DownloadRefusal::Expired);
        }
        let found = match self.artifacts.get(id, name) {
            // The URL is signed: its area is one this cluster wrote.
            None if self.shared => self.artifacts.adopt(&Area::named(area), id, name),
            found => found,
        };
        match found {
            Some(e) if e.area.as_str() == area => Ok(e),
            _ => Err(DownloadRefusal::Gone),
        }
    }
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
