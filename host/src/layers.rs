//! The layers run one way: surfaces (`mcp`, `rest`, `server`) → `pipeline`
//! → `catalog` → backends (`wasm`, `db`, `upstream`, `files`) → the call
//! vocabulary (`call`). `registry` (plugins pulled from OCI registries)
//! is below the loader and names none of them. `cluster` (the replicas' shared Redis) is below all
//! of them. This test reads the sources and fails when a module names a
//! layer above it.

use std::path::Path;

/// Each layer and the modules above it, which it must not name.
const RULES: &[(&str, &[&str])] = &[
    (
        "cluster",
        &[
            "call", "pipeline", "catalog", "wasm", "db", "upstream", "files", "mcp", "rest",
            "server",
        ],
    ),
    (
        "call",
        &[
            "pipeline", "catalog", "wasm", "db", "upstream", "files", "mcp", "rest", "server",
        ],
    ),
    (
        "registry",
        &[
            "pipeline", "catalog", "wasm", "db", "upstream", "files", "mcp", "rest", "server",
            "loader",
        ],
    ),
    ("wasm", &["pipeline", "catalog", "mcp", "rest", "server"]),
    // The host-wide key-value store: used by the guest capability (wasm)
    // and by MCP tasks, so it names neither.
    (
        "kv",
        &[
            "pipeline", "catalog", "wasm", "db", "upstream", "files", "mcp", "rest", "server",
        ],
    ),
    ("db", &["pipeline", "catalog", "mcp", "rest", "server"]),
    (
        "upstream",
        &["pipeline", "catalog", "mcp", "rest", "server"],
    ),
    ("files", &["pipeline", "catalog", "mcp", "rest", "server"]),
    ("catalog", &["pipeline", "mcp", "rest", "server"]),
    ("pipeline", &["mcp", "rest", "server"]),
];

/// Every `.rs` file under `dir`, or `dir.rs` itself when it is a file module.
fn sources(root: &Path, module: &str) -> Vec<std::path::PathBuf> {
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

#[test]
fn no_layer_names_one_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut wrong = Vec::new();
    for (layer, above) in RULES {
        let files = sources(&root, layer);
        assert!(!files.is_empty(), "no sources found for layer {layer}");
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for up in *above {
                    if code.contains(&format!("crate::{up}::"))
                        || code.contains(&format!("crate::{up};"))
                        || code.contains(&format!("crate::{up}}}"))
                    {
                        wrong.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
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
