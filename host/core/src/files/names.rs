//! What files are called: the area (session or principal) they belong to,
//! the names a file may have, its media type, and names in URLs.

use sha2::{Digest, Sha256};

// The schemes of the handles a caller is given (`upload://…`,
// `artifact://…`) and where a component sees them.
pub const UPLOAD_SCHEME: &str = "upload://";
pub const ARTIFACT_SCHEME: &str = "artifact://";
/// Where a component sees the uploads of its call: `/uploads/<id>/<name>`.
pub const GUEST_UPLOADS: &str = "/uploads";
/// Where a component leaves its artifacts.
pub const GUEST_ARTIFACTS: &str = "/artifacts";

/// Longest file name kept.
const MAX_NAME_BYTES: usize = 255;

/// Whose files: an MCP session's (its id), or, without a session, an
/// authenticated principal's (`p-` and a hash of the subject). A call
/// with neither gets an area of its own (`c-<call id>`): its artifacts
/// are reachable only by their download URLs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Area(String);

impl Area {
    /// The area of a caller; `None` for an anonymous one.
    pub fn of(session_id: Option<&str>, subject: Option<&str>) -> Option<Area> {
        if let Some(id) = session_id.filter(|s| safe_component(s)) {
            return Some(Area(id.to_string()));
        }
        let digest = hex::encode(Sha256::digest(subject?.as_bytes()));
        Some(Area(format!("p-{}", &digest[..32])))
    }

    /// The area a signed download URL names (checked as a path component
    /// before it is used as one).
    pub(super) fn named(area: &str) -> Area {
        Area(area.to_string())
    }

    pub(super) fn of_call(call_id: &str) -> Area {
        Area(format!("c-{call_id}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Letters, digits, `-` and `_`: safe as one path component and in a URI.
pub(super) fn safe_component(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Why a file name is refused, if it is: names are kept as they are, so
/// they must be one plain path component.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a file needs a name".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!("file name over {MAX_NAME_BYTES} bytes"));
    }
    if name == "." || name == ".." || name.starts_with('.') {
        return Err(format!("file name {name:?} may not start with a dot"));
    }
    if name
        .chars()
        .any(|c| c == '/' || c == '\\' || c.is_control())
    {
        return Err(format!(
            "file name {name:?} may not hold slashes or control characters"
        ));
    }
    Ok(())
}

/// The media type of a file, by its extension.
pub fn mime_type(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "xml" => "application/xml",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `Content-Disposition` of a download: always an attachment (saved,
/// never shown in the browser's tab as a page of this origin), named by
/// `filename*` (RFC 6266/8187: UTF-8, percent-encoded) with a plain ASCII
/// `filename` for clients that read only that one (anything but letters,
/// digits and `-._` becomes `_`, so no quote or separator can break out).
pub fn attachment(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-._".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "attachment; filename=\"{ascii}\"; filename*=UTF-8''{}",
        percent_encode(name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attachment_names_the_file_safely_both_ways() {
        assert_eq!(
            attachment("report.csv"),
            "attachment; filename=\"report.csv\"; filename*=UTF-8''report.csv"
        );
        assert_eq!(
            attachment("ü \"x\";.html"),
            "attachment; filename=\"___x__.html\"; filename*=UTF-8''%C3%BC%20%22x%22%3B.html"
        );
    }
}
