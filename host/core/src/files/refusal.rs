//! Why a signed download URL was refused: apart from the signing code so
//! the files root (and the download route) name the answer without naming
//! how URLs are signed.

/// Why a download URL was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum DownloadRefusal {
    BadSignature,
    Expired,
    /// The artifact expired or was never there.
    Gone,
}
