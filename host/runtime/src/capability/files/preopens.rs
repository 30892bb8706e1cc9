//! `Preopens`: the folders one call mounts. Apart from the capability so
//! that what every capability step is given (`shape::CallSetup`) can name
//! it without naming the capability.

use std::path::PathBuf;
use std::sync::Arc;

use super::write_cap::WriteCap;

/// Host folders one call's guest sees, each at its guest path: the only
/// part of the filesystem it can reach. None by default.
#[derive(Debug, Clone, Default)]
pub struct Preopens {
    pub(super) dirs: Vec<(PathBuf, String, bool)>,
    /// What the guest may write into its writable folders while it runs.
    pub(super) write_cap: Option<Arc<WriteCap>>,
}

impl Preopens {
    /// `host` mounted at `guest`, read-only.
    pub fn read_only(&mut self, host: PathBuf, guest: &str) {
        self.dirs.push((host, guest.to_string(), false));
    }

    /// `host` mounted at `guest`, readable and writable; the guest's
    /// writes fail once they have spent `cap` (see [`WriteCap`]).
    pub fn writable(&mut self, host: PathBuf, guest: &str, cap: Arc<WriteCap>) {
        self.dirs.push((host, guest.to_string(), true));
        self.write_cap = Some(cap);
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }
}
