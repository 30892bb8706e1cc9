//! State sync: a write tool's `invalidates` globs drop the cached results
//! of the read tools and DB resources they match.

use super::{Backend, Catalog, Provider};

impl Catalog {
    /// Clears the result caches of every DB tool whose name, and every DB
    /// resource or template whose URI, matches one of `globs`; answers
    /// the names and URIs cleared, in catalog order. Entries that cache
    /// nothing are not listed: there was nothing to make stale.
    pub fn invalidate(&self, globs: &[String]) -> Vec<String> {
        if globs.is_empty() {
            return Vec::new();
        }
        let matches = |name: &str| globs.iter().any(|g| glob_match(g, name));
        let mut cleared = Vec::new();
        for tool in &self.order {
            if let Backend::Sql(db) = &tool.backend
                && matches(&tool.def.name)
                && db.clear_cache()
            {
                cleared.push(tool.def.name.clone());
            }
        }
        let offered = &self.offered;
        let resources = offered
            .resources
            .iter()
            .map(|r| (r.def.uri.as_str(), &r.provider));
        let templates = offered
            .templates
            .iter()
            .map(|t| (t.def.uri_template.as_str(), &t.provider));
        for (uri, provider) in resources.chain(templates) {
            if let Provider::Sql(db) = provider
                && matches(uri)
                && db.clear_cache()
            {
                cleared.push(uri.to_string());
            }
        }
        cleared
    }
}

/// Whether `text` matches `pattern`, where `*` stands for any run of
/// characters (dots and slashes included) and `?` for one character.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // The classic two-pointer match with backtracking to the last star.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs_match_names_and_uris() {
        assert!(glob_match("demo.products.*", "demo.products.get"));
        assert!(glob_match("demo.products.*", "demo.products."));
        assert!(!glob_match("demo.products.*", "demo.product"));
        assert!(glob_match("demo://products/*", "demo://products/{id}"));
        assert!(glob_match("*.get", "demo.products.get"));
        assert!(glob_match("demo.?roducts.get", "demo.products.get"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
        assert!(glob_match("*", ""));
    }
}
