//! Ranked search over the catalog for `search_tools`: BM25 (the `bm25`
//! crate, whose tokenizer stems English word forms and drops stop words),
//! with query words that match no catalog word corrected to the nearest one
//! (Damerau–Levenshtein, `strsim`) so small typos still find their tool.

use std::collections::HashSet;

use bm25::{Language, SearchEngine, SearchEngineBuilder};

/// The search index of one catalog; document ids are catalog positions.
pub struct ToolSearch {
    engine: SearchEngine<u32>,
    vocabulary: HashSet<String>,
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
        ToolSearch { engine, vocabulary }
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

    /// The query with each unknown word followed by its nearest catalog word.
    fn corrected(&self, query: &str) -> String {
        let mut out = Vec::new();
        for word in words(query) {
            if word.chars().count() >= 4
                && !self.vocabulary.contains(&word)
                && let Some(near) = self.nearest(&word)
            {
                out.push(near.to_string());
            }
            out.push(word);
        }
        out.join(" ")
    }

    fn nearest(&self, word: &str) -> Option<&str> {
        let max = if word.chars().count() <= 5 { 1 } else { 2 };
        self.vocabulary
            .iter()
            .map(|v| (strsim::damerau_levenshtein(word, v), v))
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
}
