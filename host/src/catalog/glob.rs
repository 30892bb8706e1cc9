//! The glob of `invalidates` (`*` any run, `?` one character): its own
//! file so the catalog root re-exports it without naming the state-sync
//! code that uses it.

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
