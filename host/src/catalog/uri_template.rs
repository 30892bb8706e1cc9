//! Matching a URI against a resource template: RFC 6570 level 1 (`{var}`,
//! one path segment: no `/`, `?` or `#`) and reserved expansion (`{+var}`,
//! anything, `/` included). Only matching is needed (a template names which
//! URIs a component can read), which no kept crate offers; expansion crates
//! (`iri-string`, `uri-template-system`) go the other way.

/// One piece of a template.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Var { name: String, reserved: bool },
}

/// A parsed URI template.
#[derive(Debug, Clone)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    /// Parses `template`; an unclosed or empty `{}` is an error.
    pub fn parse(template: &str) -> Result<UriTemplate, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_string()));
            }
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("uri template {template:?}: unclosed '{{'"))?;
            let inner = &rest[open + 1..open + close];
            let (name, reserved) = match inner.strip_prefix('+') {
                Some(n) => (n, true),
                None => (inner, false),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!(
                    "uri template {template:?}: {{{inner}}} is not a simple variable"
                ));
            }
            if matches!(parts.last(), Some(Part::Var { .. })) {
                return Err(format!(
                    "uri template {template:?}: two variables need a literal between them"
                ));
            }
            parts.push(Part::Var {
                name: name.to_string(),
                reserved,
            });
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        Ok(UriTemplate { parts })
    }

    /// The variable names, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var { name, .. } => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The variables' values when `uri` matches (percent-decoded), else `None`.
    pub fn matches(&self, uri: &str) -> Option<Vec<(String, String)>> {
        let mut values = Vec::new();
        let mut rest = uri;
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Part::Var { name, reserved } => {
                    // A variable runs to the next literal (or to the end).
                    let end = match parts.peek() {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    let allowed = *reserved || !value.contains(['/', '?', '#']);
                    if value.is_empty() || !allowed {
                        return None;
                    }
                    values.push((name.clone(), decode(value)));
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(values)
    }
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(t: &str, uri: &str) -> Option<Vec<(String, String)>> {
        UriTemplate::parse(t).unwrap().matches(uri)
    }

    #[test]
    fn simple_variables_match_one_segment() {
        assert_eq!(
            vars("test://template/{id}/data", "test://template/123/data"),
            Some(vec![("id".into(), "123".into())])
        );
        assert_eq!(
            vars("test://template/{id}/data", "test://template/1/2/data"),
            None
        );
        assert_eq!(
            vars("test://template/{id}/data", "test://template//data"),
            None
        );
        assert_eq!(
            vars("db://products/{id}", "db://products/7x"),
            Some(vec![("id".into(), "7x".into())])
        );
        assert_eq!(vars("db://products/{id}", "db://product/7"), None);
        assert_eq!(
            vars("notes://{a}.{b}", "notes://x%20y.z"),
            Some(vec![("a".into(), "x y".into()), ("b".into(), "z".into())])
        );
    }

    #[test]
    fn reserved_variables_take_slashes() {
        assert_eq!(
            vars("file:///{+path}", "file:///a/b/c.txt"),
            Some(vec![("path".into(), "a/b/c.txt".into())])
        );
    }

    #[test]
    fn bad_templates_are_refused() {
        assert!(UriTemplate::parse("x://{id").is_err());
        assert!(UriTemplate::parse("x://{}").is_err());
        assert!(UriTemplate::parse("x://{a}{b}").is_err());
        assert!(UriTemplate::parse("x://{?q}").is_err());
    }
}
