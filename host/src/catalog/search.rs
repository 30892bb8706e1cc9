//! Ranked search over the catalog for `search_tools`: BM25 (the `bm25`
//! crate, whose tokenizer stems English word forms and drops stop words),
//! with query words that match no catalog word corrected to the nearest one
//! (Damerau–Levenshtein, `strsim`) so small typos still find their tool.
//!
//! The work per query is bounded whatever the caller sends: only the first
//! [`MAX_QUERY_WORDS`] words count, a word over [`MAX_WORD_CHARS`] is
//! dropped (no catalog word is that long), only words of 4 to
//! [`MAX_CORRECTED_CHARS`] characters are corrected, and a correction only
//! compares catalog words of a length within its distance. (`search_tools`
//! refuses queries over 1,000 characters before they get here.)

use std::collections::HashSet;

use bm25::{Language, SearchEngine, SearchEngineBuilder};

/// Words of a query that are searched; later ones are ignored.
pub const MAX_QUERY_WORDS: usize = 32;
/// Longer query words are dropped.
pub const MAX_WORD_CHARS: usize = 64;
/// Longer query words are searched as they are, never corrected.
pub const MAX_CORRECTED_CHARS: usize = 24;

/// The search index of one catalog; document ids are catalog positions.
pub struct ToolSearch {
    engine: SearchEngine<u32>,
    vocabulary: HashSet<String>,
    /// The vocabulary with each word's length in characters, for corrections.
    lengths: Vec<(String, usize)>,
}

/// The words of a text: lower-cased runs of letters and digits (tool names
/// split at `.`, `_` and `-`).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

impl ToolSearch {
    /// Indexes one document per tool, in catalog order.
    pub fn new<'a>(tools: impl Iterator<Item = (&'a str, Option<&'a str>, &'a str)>) -> ToolSearch {
        let mut vocabulary = HashSet::new();
        let corpus: Vec<String> = tools
            .map(|(name, title, description)| {
                let name_words: Vec<String> = words(name).collect();
                vocabulary.extend(name_words.iter().cloned());
                vocabulary.extend(words(description));
                vocabulary.extend(title.into_iter().flat_map(words));
                // The name counts twice: it says most about what the tool does.
                let name_text = name_words.join(" ");
                format!(
                    "{name_text} {name_text} {} {description}",
                    title.unwrap_or_default()
                )
            })
            .collect();
        let engine = SearchEngineBuilder::<u32>::with_corpus(Language::English, corpus).build();
        let mut lengths: Vec<(String, usize)> = vocabulary
            .iter()
            .map(|w| (w.clone(), w.chars().count()))
            .collect();
        lengths.sort();
        ToolSearch {
            engine,
            vocabulary,
            lengths,
        }
    }

    /// Catalog positions with their scores, best first.
    pub fn search(&self, query: &str) -> Vec<(usize, f32)> {
        let query = self.corrected(query);
        self.engine
            .search(&query, None)
            .into_iter()
            .map(|r| (r.document.id as usize, r.score))
            .collect()
    }

    /// The query's first words, each unknown one followed by its nearest
    /// catalog word.
    fn corrected(&self, query: &str) -> String {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for word in words(query)
            .filter(|w| w.chars().count() <= MAX_WORD_CHARS)
            .take(MAX_QUERY_WORDS)
        {
            let chars = word.chars().count();
            if (4..=MAX_CORRECTED_CHARS).contains(&chars)
                && !self.vocabulary.contains(&word)
                && seen.insert(word.clone())
                && let Some(near) = self.nearest(&word, chars)
            {
                out.push(near.to_string());
            }
            out.push(word);
        }
        out.join(" ")
    }

    /// The closest catalog word within 1 edit (words of up to 5 characters)
    /// or 2; words whose length differs by more cannot be that close.
    fn nearest(&self, word: &str, chars: usize) -> Option<&str> {
        let max = if chars <= 5 { 1 } else { 2 };
        self.lengths
            .iter()
            .filter(|(_, len)| len.abs_diff(chars) <= max)
            .map(|(v, _)| (strsim::damerau_levenshtein(word, v), v))
            .filter(|(d, _)| *d <= max)
            .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)))
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> ToolSearch {
        ToolSearch::new(
            [
                (
                    "billing.invoices.list",
                    None,
                    "List the invoices of a customer",
                ),
                ("billing.invoices.void", None, "Void an unpaid invoice"),
                (
                    "crm.contacts.create",
                    Some("New contact"),
                    "Create a contact in the CRM",
                ),
                ("weather.forecast", None, "Forecast the weather for a city"),
            ]
            .into_iter(),
        )
    }

    #[test]
    fn ranks_by_words_and_word_forms() {
        let s = index();
        assert_eq!(s.search("listing invoice")[0].0, 0);
        assert_eq!(s.search("creating contacts")[0].0, 2);
        assert_eq!(s.search("what is the weather forecast in Paris")[0].0, 3);
    }

    #[test]
    fn tolerates_small_typos() {
        let s = index();
        assert_eq!(s.search("invocies void")[0].0, 1);
        assert_eq!(s.search("wether")[0].0, 3);
        assert!(s.search("zzzz").is_empty());
    }

    #[test]
    fn only_the_first_words_count() {
        let s = index();
        let filler = "zzzz ".repeat(MAX_QUERY_WORDS);
        assert!(s.search(&format!("{filler} weather")).is_empty());
        assert_eq!(s.search(&format!("weather {filler}"))[0].0, 3);
        // An over-long word is dropped, not counted among the first words.
        let long = "q".repeat(MAX_WORD_CHARS + 1);
        assert_eq!(s.search(&format!("{long} weather"))[0].0, 3);
    }

    #[test]
    fn a_long_query_is_cut_to_its_first_words() {
        let s = index();
        let query: String = (0..20_000).map(|i| format!("wether{i} ")).collect();
        // Each kept word may bring one correction, no more.
        assert!(s.corrected(&query).split(' ').count() <= 2 * MAX_QUERY_WORDS);
        let typos = "wether ".repeat(1000);
        assert_eq!(s.corrected(&typos).split(' ').count(), MAX_QUERY_WORDS + 1);
    }
}
