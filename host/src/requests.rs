//! What a component from a registry asks for (its `dev.hangar.requests`
//! annotation) beside what `hangar.toml` grants it, for `hangar check`.
//! Only words: the grants in `hangar.toml` alone decide what a plugin may
//! reach.

use hangar_config::Grants;
use hangar_runtime::http::HttpGrants;

/// Checks a requests file before it is pushed: its `http` entries must be
/// what a grant may say (`host`, `host:port`, `*.domain`).
pub fn validate(requests: &Grants) -> Result<(), String> {
    HttpGrants::parse(&requests.http).map(|_| ())
}

/// `requests …` and `granted …` lines: each requested entry as granted or
/// not, and what is granted without being requested.
pub fn lines(asked: &Grants, granted: Option<&Grants>) -> Vec<String> {
    let none = Grants::default();
    let granted = granted.unwrap_or(&none);
    let http = HttpGrants::parse(&granted.http).unwrap_or_default();
    let mut requested = Vec::new();
    let mut yes = Vec::new();
    let mut no = Vec::new();
    let mut sort = |item: String, covered: bool| {
        requested.push(item.clone());
        (if covered { &mut yes } else { &mut no }).push(item);
    };
    for host in &asked.http {
        let covered =
            granted.http.iter().any(|g| g.eq_ignore_ascii_case(host)) || http.covers(host);
        sort(format!("http {host}"), covered);
    }
    for name in &asked.credentials {
        sort(
            format!("credentials {name}"),
            granted.credentials.contains(name),
        );
    }
    let mut beyond = Vec::new();
    for host in &granted.http {
        let asked_for = asked.http.iter().any(|a| a.eq_ignore_ascii_case(host))
            || HttpGrants::parse(std::slice::from_ref(host))
                .is_ok_and(|g| asked.http.iter().any(|a| g.covers(a)));
        if !asked_for {
            beyond.push(format!("http {host}"));
        }
    }
    for name in &granted.credentials {
        if !asked.credentials.contains(name) {
            beyond.push(format!("credentials {name}"));
        }
    }
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join(", ")
        }
    };
    let mut out = vec![
        format!("requests {}", list(&requested)),
        format!("granted: {}; not granted: {}", list(&yes), list(&no)),
    ];
    if !beyond.is_empty() {
        out.push(format!(
            "granted beyond its requests: {}",
            beyond.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(http: &[&str], credentials: &[&str]) -> Grants {
        Grants {
            http: http.iter().map(|s| s.to_string()).collect(),
            credentials: credentials.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn requests_beside_grants() {
        let asked = grants(
            &["api.example.com", "cdn.example.org", "127.0.0.1:9000"],
            &["github"],
        );
        assert_eq!(
            lines(&asked, None),
            [
                "requests http api.example.com, http cdn.example.org, http 127.0.0.1:9000, credentials github",
                "granted: none; not granted: http api.example.com, http cdn.example.org, http 127.0.0.1:9000, credentials github",
            ]
        );
        let granted = grants(
            &["API.example.com", "*.example.org", "10.0.0.1"],
            &["slack"],
        );
        assert_eq!(
            lines(&asked, Some(&granted)),
            [
                "requests http api.example.com, http cdn.example.org, http 127.0.0.1:9000, credentials github",
                "granted: http api.example.com, http cdn.example.org; not granted: http 127.0.0.1:9000, credentials github",
                "granted beyond its requests: http 10.0.0.1, credentials slack",
            ]
        );
        assert_eq!(
            lines(&Grants::default(), None),
            ["requests none", "granted: none; not granted: none"]
        );
    }

    #[test]
    fn requests_are_validated_as_grants() {
        assert!(validate(&grants(&["api.example.com", "*.x.org", "127.0.0.1:1"], &[])).is_ok());
        let e = validate(&grants(&["https://api.example.com/"], &[])).unwrap_err();
        assert!(e.contains("https://api.example.com/"), "{e}");
    }
}
