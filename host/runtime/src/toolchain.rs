//! Which toolchain built a component, read from its `producers` custom
//! sections (at any depth: a component's core modules carry their own):
//! what the explorer says a plugin is ("a Python component"). A courtesy,
//! like the WIT docs: a component that says nothing is `Other`, never an
//! error.

use serde::Serialize;

/// The language a component was written in, as far as its producers say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Toolchain {
    /// wit-bindgen-rust, or a module whose language is Rust alone.
    Rust,
    /// componentize-py (CPython built for WASI, initialised at build time).
    Python,
    /// componentize-js (StarlingMonkey, which says its language is JavaScript).
    JavaScript,
    /// Anything else, or nothing said.
    #[default]
    Other,
}

impl Toolchain {
    /// The toolchain the `producers` sections of `bytes` name.
    pub fn of(bytes: &[u8]) -> Toolchain {
        let mut said = Said::default();
        for payload in wasmparser::Parser::new(0).parse_all(bytes) {
            let Ok(wasmparser::Payload::CustomSection(section)) = payload else {
                continue;
            };
            if let wasmparser::KnownCustom::Producers(reader) = section.as_known() {
                said.read(reader);
            }
        }
        said.toolchain()
    }
}

/// What the producers sections said, over every module.
#[derive(Default)]
struct Said {
    languages: Vec<String>,
    tools: Vec<String>,
}

impl Said {
    fn read(&mut self, reader: wasmparser::ProducersSectionReader<'_>) {
        for field in reader.into_iter().flatten() {
            let into = match field.name {
                "language" => &mut self.languages,
                "processed-by" => &mut self.tools,
                _ => continue,
            };
            into.extend(
                field
                    .values
                    .into_iter()
                    .flatten()
                    .map(|v| v.name.to_string()),
            );
        }
    }

    fn toolchain(&self) -> Toolchain {
        let language = |l: &str| self.languages.iter().any(|x| x == l);
        let tool = |t: &str| self.tools.iter().any(|x| x.eq_ignore_ascii_case(t));
        if language("JavaScript") || tool("ComponentizeJS") {
            Toolchain::JavaScript
        } else if language("Python") || tool("componentize-py") || tool("component-init-transform")
        {
            // componentize-py names no language; the pre-initialisation it
            // runs at build time leaves `component-init-transform`.
            Toolchain::Python
        } else if tool("wit-bindgen-rust") || (language("Rust") && self.languages.len() == 1) {
            Toolchain::Rust
        } else {
            Toolchain::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(languages: &[&str], tools: &[&str]) -> Toolchain {
        Said {
            languages: languages.iter().map(|s| s.to_string()).collect(),
            tools: tools.iter().map(|s| s.to_string()).collect(),
        }
        .toolchain()
    }

    #[test]
    fn each_toolchain_is_told_by_what_its_builds_say() {
        // As the example plugins' producers sections read.
        assert_eq!(
            said(&[], &["wit-component", "wit-bindgen-rust"]),
            Toolchain::Rust
        );
        assert_eq!(
            said(
                &["Rust"],
                &["wit-component", "rustc", "component-init-transform"]
            ),
            Toolchain::Python
        );
        assert_eq!(
            said(
                &["C11", "Rust", "C_plus_plus_14", "JavaScript"],
                &["clang", "rustc", "wit-component", "ComponentizeJS"]
            ),
            Toolchain::JavaScript
        );
        assert_eq!(said(&["C11"], &["clang"]), Toolchain::Other);
        assert_eq!(Toolchain::of(b"not wasm"), Toolchain::Other);
    }
}
