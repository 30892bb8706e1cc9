//! The layers inside crate `hangar` run one way: surfaces (`mcp`, `rest`,
//! `server`) → `pipeline` → `catalog` → backends (`db`, `upstream`, and
//! the wasm runtime, crate `hangar-runtime`). Beneath them, in crates of
//! their own that Cargo keeps apart, are `hangar-core` (the call
//! vocabulary, kv, the replicas' Redis, the files store, accounts,
//! outbound HTTP) and `hangar-config` at the bottom.
//!
//! Inside `hangar` the rules are read from the sources: surfaces reach
//! backends only through the pipeline (they name no backend); backends do
//! not name each other (what two of them share lives in `hangar-core`);
//! and every top-level module has a rule (`every_module_has_a_rule`). This
//! test reads the sources and fails on an import against a rule;
//! `scripts/circles.py` checks, per crate, that no two files name each
//! other.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SURFACES: &[&str] = &["mcp", "rest", "server"];
/// The wasm runtime is a backend in a crate of its own: named by its crate.
const BACKENDS: &[&str] = &["db", "upstream", "hangar_runtime"];

/// Each top-level module of `hangar` and the modules (and crates) it must not name.
fn rules() -> Vec<(&'static str, Vec<&'static str>)> {
    let above_backends = ["pipeline", "catalog", "mcp", "rest", "server"];
    // What starts and reloads the server, and reports on it.
    let assembly = ["loader", "reload", "health"];
    let everything: Vec<&'static str> = [
        &above_backends[..],
        BACKENDS,
        &assembly[..],
        &[
            "oauth", "registry", "metrics", "traces", "requests", "scaffold",
        ],
    ]
    .concat();
    let mut rules: Vec<(&'static str, Vec<&'static str>)> = vec![
        ("pipeline", [SURFACES, &assembly[..], &["oauth"]].concat()),
        (
            "catalog",
            [&["pipeline", "oauth"][..], SURFACES, &assembly[..]].concat(),
        ),
        // Builds catalogs: below what serves and reloads them.
        (
            "loader",
            [SURFACES, &["pipeline", "reload", "health", "oauth"]].concat(),
        ),
        ("reload", [SURFACES, &["oauth"]].concat()),
        (
            "health",
            [SURFACES, &["reload", "loader", "oauth"]].concat(),
        ),
        // The bearer-token door: beside the surfaces, over the pipeline's door.
        ("oauth", [SURFACES, BACKENDS, &assembly[..]].concat()),
        // Plugins pulled from OCI registries: below the loader, above nothing.
        (
            "registry",
            everything
                .iter()
                .copied()
                .filter(|m| *m != "registry")
                .collect(),
        ),
        // What a registry component requests beside its grants (`hangar check`).
        (
            "requests",
            everything
                .iter()
                .copied()
                .filter(|m| !["requests", "hangar_runtime"].contains(m))
                .collect(),
        ),
        // `hangar new`: names nothing of the server.
        (
            "scaffold",
            everything
                .iter()
                .copied()
                .filter(|m| *m != "scaffold")
                .collect(),
        ),
    ];
    // Any layer may read metrics and traces; they read only `hangar-core`.
    for beside in ["metrics", "traces"] {
        rules.push((
            beside,
            everything
                .iter()
                .copied()
                .filter(|m| !["metrics", "traces"].contains(m))
                .collect(),
        ));
    }
    for surface in SURFACES {
        rules.push((surface, [BACKENDS, &["loader", "registry"]].concat()));
    }
    for backend in BACKENDS.iter().filter(|b| **b != "hangar_runtime") {
        let others = BACKENDS.iter().copied().filter(|b| b != backend);
        rules.push((
            backend,
            above_backends
                .iter()
                .copied()
                .chain(others)
                .chain(assembly)
                .chain(["oauth", "registry"])
                .collect(),
        ));
    }
    rules
}

/// Every `.rs` file under `dir`, or `dir.rs` itself when it is a file module.
fn sources(root: &Path, module: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let file = root.join(format!("{module}.rs"));
    if file.is_file() {
        out.push(file);
    }
    let mut dirs = vec![root.join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// The crate's top-level modules a file names, with the line of each:
/// `crate::x::…`, `crate::x;` and the groups of `use crate::{x::…, y};`,
/// also across lines; and `hangar_runtime` wherever a path names it.
/// Comments are left out.
fn named_modules(text: &str) -> Vec<(String, usize)> {
    let code = without_comments(text);
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut out: Vec<(String, usize)> = names_module(text, "hangar_runtime")
        .into_iter()
        .map(|line| ("hangar_runtime".to_string(), line))
        .collect();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The first segment of each item of the group, at depth 0.
            let mut depth = 0;
            let mut item_start = true;
            for (i, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && depth == 0 && (c.is_alphabetic() || c == '_') => {
                        let name: String = group[i..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        out.push((name, line_of(at)));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push((name, line_of(at)));
            }
        }
    }
    out
}

/// The text with every `//` comment cut off, lines kept.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines where a file names the module `module` at any depth of a
/// path: a path through it (`super::modern::x`, `modern::y`), or a `use`
/// declaration that lists it (`use super::{modern, z};`). A field or a
/// variable of that name is not a path. Comments are left out.
fn names_module(text: &str, module: &str) -> Vec<usize> {
    let code = without_comments(text);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (at, _) in code.match_indices(module) {
        let before = code[..at].chars().next_back();
        let after = &code[at + module.len()..];
        if before.is_some_and(ident) || after.chars().next().is_some_and(ident) {
            continue;
        }
        let through = after.trim_start().starts_with("::");
        // Inside a `use` declaration: a `use` came after the last `;`.
        let head = &code[..at];
        let last_use = head
            .rmatch_indices("use ")
            .map(|(i, _)| i)
            .find(|i| !head[..*i].chars().next_back().is_some_and(ident));
        let in_use = last_use.is_some_and(|u| head.rfind(';').is_none_or(|semi| semi < u));
        if through || in_use {
            out.push(code[..at].matches('\n').count() + 1);
        }
    }
    out
}

#[test]
fn no_layer_names_one_it_must_not() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut wrong = Vec::new();
    for (layer, banned) in rules() {
        let files = sources(&root, layer);
        assert!(!files.is_empty(), "no sources found for layer {layer}");
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            for (name, line) in named_modules(&text) {
                if banned.contains(&name.as_str()) {
                    wrong.push(format!("{}:{line}: {layer} names {name}", path.display()));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
}

/// The top-level modules `lib.rs` declares.
fn top_level_modules(root: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(root.join("lib.rs")).unwrap();
    (lib.lines())
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))
        })
        .map(|m| m.trim_end_matches(';').to_string())
        .filter(|m| m != "layers")
        .collect()
}

#[test]
fn every_module_has_a_rule() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let ruled: BTreeSet<&str> = rules().into_iter().map(|(m, _)| m).collect();
    let modules = top_level_modules(&root);
    assert!(modules.len() > 10, "lib.rs read wrong: {modules:?}");
    let without: Vec<&String> = (modules.iter())
        .filter(|m| !ruled.contains(m.as_str()))
        .collect();
    assert!(
        without.is_empty(),
        "modules with no layer rule: {without:?}"
    );
}

#[test]
fn the_reader_sees_groups_and_paths() {
    let text = "use crate::{catalog::Catalog, db::{self, x}};\n// crate::files::x\nlet x = crate::files::read();\nuse hangar_runtime::ToolPlugin;\nuse crate::mcp;";
    let names: Vec<String> = named_modules(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["hangar_runtime", "catalog", "db", "files", "mcp"]);
}

/// MCP's handlers are shared by both protocol revisions; what only one
/// revision does lives in its front, `mcp/legacy/` (2025) or `mcp/modern/`
/// (2026-07-28), which calls them through `Front` (`mcp/request.rs`). Only
/// the transports — the router (`mcp/mod.rs`), its dispatch
/// (`mcp/dispatch.rs`) and stdio (`mcp/stdio.rs`) — name a front, and
/// neither front names the other.
#[test]
fn shared_mcp_handlers_name_no_front() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mcp = root.join("mcp");
    let transports = ["mod.rs", "dispatch.rs", "stdio.rs"].map(|f| mcp.join(f));
    let mut wrong = Vec::new();
    for path in sources(&root, "mcp") {
        if transports.contains(&path) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for front in ["legacy", "modern"] {
            if path.starts_with(mcp.join(front)) {
                continue;
            }
            for line in names_module(&text, front) {
                wrong.push(format!("{}:{line}: names {front}", path.display()));
            }
        }
    }
    wrong.sort();
    assert!(
        wrong.is_empty(),
        "MCP files that name a front they are not part of:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_sees_a_module_at_any_depth() {
    let text = "use super::{jsonrpc, modern::meta};\n// super::modern::x\nlet m = req.modern;\nlet r = super::modern::result::complete(v);\nuse super::{x,\n  modern};\nlet modernity = 1;";
    assert_eq!(names_module(text, "modern"), [1, 4, 6]);
}
