//! `hangar new`: writes a minimal, buildable plugin project — the WIT
//! included, a `build.sh` — for a tool, an auth check or a mapper, in Rust,
//! Python or JavaScript; with `--http`, a tool that calls a JSON API through
//! `wasi:http` (Rust with `wstd`, JavaScript with `fetch`, Python with a small
//! client over componentize-py's `wasi:http` bindings).

use std::path::Path;

/// Which world the plugin exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Tool,
    Auth,
    Mapper,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// The `hangar:plugin` package, file by file (`server.wit` holds the
/// `client` interface every tool world imports).
const WIT_FILES: &[(&str, &str)] = &[
    ("kv.wit", include_str!("../../../wit/kv.wit")),
    ("server.wit", include_str!("../../../wit/server.wit")),
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
];
/// The WASI packages `worlds.wit` refers to (for the `tool-http` world),
/// vendored in `wit/deps/`.
const WIT_DEPS: [(&str, &str); 7] = [
    ("cli.wit", include_str!("../../../wit/deps/cli.wit")),
    ("clocks.wit", include_str!("../../../wit/deps/clocks.wit")),
    (
        "filesystem.wit",
        include_str!("../../../wit/deps/filesystem.wit"),
    ),
    ("http.wit", include_str!("../../../wit/deps/http.wit")),
    ("io.wit", include_str!("../../../wit/deps/io.wit")),
    ("random.wit", include_str!("../../../wit/deps/random.wit")),
    ("sockets.wit", include_str!("../../../wit/deps/sockets.wit")),
];
/// The Python `--http` tool's client over the wasi:http bindings, the one
/// `plugins/py-http` uses.
const PY_HTTP_CLIENT: &str = include_str!("../../../plugins/py-http/http_client.py");

fn source(kind: Kind, lang: Lang) -> &'static str {
    match (lang, kind) {
        (Lang::Rust, Kind::Tool) => include_str!("rust_tool.rs.txt"),
        (Lang::Rust, Kind::Auth) => include_str!("rust_auth.rs.txt"),
        (Lang::Rust, Kind::Mapper) => include_str!("rust_mapper.rs.txt"),
        (Lang::Python, Kind::Tool) => include_str!("py_tool.py.txt"),
        (Lang::Python, Kind::Auth) => include_str!("py_auth.py.txt"),
        (Lang::Python, Kind::Mapper) => include_str!("py_mapper.py.txt"),
        (Lang::Js, Kind::Tool) => include_str!("js_tool.js.txt"),
        (Lang::Js, Kind::Auth) => include_str!("js_auth.js.txt"),
        (Lang::Js, Kind::Mapper) => include_str!("js_mapper.js.txt"),
    }
}

/// The `--http` tool templates: they call the JSON API at config `base_url`.
fn http_source(lang: Lang) -> anyhow::Result<&'static str> {
    match lang {
        Lang::Rust => Ok(include_str!("rust_tool_http.rs.txt")),
        Lang::Js => Ok(include_str!("js_tool_http.js.txt")),
        Lang::Python => Ok(include_str!("py_tool_http.py.txt")),
    }
}

/// The world a project is built against: a Python `--http` tool needs
/// `tool-http` for componentize-py to generate the `wasi:http` bindings
/// (Rust and JavaScript get the import from their HTTP library).
fn world(kind: Kind, lang: Lang, http: bool) -> &'static str {
    match kind {
        Kind::Tool if http && lang == Lang::Python => "tool-http",
        Kind::Tool => "tool",
        Kind::Auth => "auth",
        Kind::Mapper => "mapper",
    }
}

/// Writes the project into `dir` (which must not exist or be empty) and
/// returns the command that builds it.
pub fn create(kind: Kind, name: &str, lang: Lang, dir: &Path) -> anyhow::Result<String> {
    create_with(kind, name, lang, dir, false)
}

/// [`create`], and with `http` a tool that calls a JSON API (`hangar new
/// tool NAME --http`): its config key `base_url`, reached under the
/// plugin's `grants = { http = [...] }`.
pub fn create_with(
    kind: Kind,
    name: &str,
    lang: Lang,
    dir: &Path,
    http: bool,
) -> anyhow::Result<String> {
    anyhow::ensure!(
        !http || kind == Kind::Tool,
        "--http writes a tool; leave it out for an auth check or a mapper"
    );
    let template = if http {
        http_source(lang)?
    } else {
        source(kind, lang)
    };
    let valid = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    anyhow::ensure!(
        valid,
        "the name must be lower-case letters, digits, - and _, starting with a letter"
    );
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        anyhow::bail!("{} exists and is not empty", dir.display());
    }
    std::fs::create_dir_all(dir.join("wit/deps"))?;
    for (file, text) in WIT_FILES {
        std::fs::write(dir.join("wit").join(file), text)?;
    }
    for (file, text) in WIT_DEPS {
        std::fs::write(dir.join("wit/deps").join(file), text)?;
    }
    let world = world(kind, lang, http);
    let code = template.replace("{{name}}", name);
    let build = match lang {
        Lang::Rust => {
            std::fs::create_dir_all(dir.join("src"))?;
            std::fs::write(dir.join("src/lib.rs"), code)?;
            std::fs::write(dir.join("Cargo.toml"), cargo_toml(name, http))?;
            format!(
                r#"rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
cargo build --target wasm32-wasip2 --release
cp "${{CARGO_TARGET_DIR:-target}}/wasm32-wasip2/release/{lib}.wasm" {name}.wasm"#,
                lib = name.replace('-', "_")
            )
        }
        Lang::Python => {
            std::fs::write(dir.join("app.py"), code)?;
            if http {
                std::fs::write(dir.join("http_client.py"), PY_HTTP_CLIENT)?;
            }
            format!(
                r#""${{COMPONENTIZE_PY:-componentize-py}}" -d wit -w {world} componentize app -o {name}.wasm"#
            )
        }
        Lang::Js => {
            std::fs::write(dir.join("app.js"), code)?;
            std::fs::write(dir.join("package.json"), package_json(name))?;
            let (note, features) = if http {
                (
                    "# -d fetch-event only: the component imports wasi:http for fetch\n\
                     # (its requests reach only the hosts granted to the plugin).",
                    "-d fetch-event",
                )
            } else {
                (
                    "# -d http fetch-event: no wasi:http import (the tool makes no requests).",
                    "-d http fetch-event",
                )
            };
            format!(
                r#"cli="${{COMPONENTIZE_JS_CLI:-node_modules/@bytecodealliance/componentize-js/src/cli.js}}"
[ -f "$cli" ] || npm install --no-audit --no-fund
{note}
node "$cli" app.js --wit wit --world-name {world} {features} -o {name}.wasm"#
            )
        }
    };
    let script = format!(
        "#!/usr/bin/env bash\n# Builds {name}.wasm; copy it into Hangar's plugins/ folder.\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\n{build}\necho \"built $(pwd)/{name}.wasm\"\n"
    );
    let build_sh = dir.join("build.sh");
    std::fs::write(&build_sh, script)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&build_sh, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(format!("{}/build.sh", dir.display()))
}

fn cargo_toml(name: &str, http: bool) -> String {
    let http = if http {
        "# Outbound HTTP over wasi:http/outgoing-handler.\nwstd = \"0.6\"\n"
    } else {
        ""
    };
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib"]

[dependencies]
wit-bindgen = "0.63"
serde_json = "1"
{http}
[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
strip = true

# A project of its own, even inside another workspace.
[workspace]
"#
    )
}

fn package_json(name: &str) -> String {
    format!(
        r#"{{
  "name": "{name}",
  "private": true,
  "type": "module",
  "devDependencies": {{
    "@bytecodealliance/componentize-js": "0.23.0",
    "@bytecodealliance/preview2-shim": "^0.17.4"
  }}
}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_combination() {
        let root = std::env::temp_dir().join(format!("hangar-scaffold-{}", std::process::id()));
        for kind in [Kind::Tool, Kind::Auth, Kind::Mapper] {
            for lang in [Lang::Rust, Lang::Python, Lang::Js] {
                let dir = root.join(format!("{kind:?}-{lang:?}"));
                let cmd = create(kind, "demo", lang, &dir).unwrap();
                assert!(cmd.ends_with("build.sh"));
                assert!(dir.join("wit/worlds.wit").exists());
                let all: String = std::fs::read_dir(&dir)
                    .unwrap()
                    .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
                    .collect();
                assert!(!all.contains("{{name}}"));
            }
        }
        for lang in [Lang::Rust, Lang::Js, Lang::Python] {
            let dir = root.join(format!("http-{lang:?}"));
            create_with(Kind::Tool, "demo", lang, &dir, true).unwrap();
            let src = dir.join("src");
            let all: String = std::fs::read_dir(&dir)
                .unwrap()
                .chain(std::fs::read_dir(&src).into_iter().flatten())
                .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
                .collect();
            assert!(!all.contains("{{name}}"));
            assert!(all.contains("base_url"));
        }
        assert!(
            std::fs::read_to_string(root.join("http-Rust/Cargo.toml"))
                .unwrap()
                .contains("wstd")
        );
        let js_build = std::fs::read_to_string(root.join("http-Js/build.sh")).unwrap();
        assert!(js_build.contains("-d fetch-event") && !js_build.contains("-d http"));
        let py_build = std::fs::read_to_string(root.join("http-Python/build.sh")).unwrap();
        assert!(py_build.contains("-w tool-http componentize app"));
        assert!(root.join("http-Python/http_client.py").exists());
        assert!(root.join("http-Python/wit/deps/http.wit").exists());
        let plain_py = std::fs::read_to_string(root.join("Tool-Python/build.sh")).unwrap();
        assert!(plain_py.contains("-w tool componentize app"));
        assert!(!root.join("Tool-Python/http_client.py").exists());
        assert!(
            create_with(
                Kind::Auth,
                "demo",
                Lang::Rust,
                &root.join("http-auth"),
                true
            )
            .is_err()
        );
        assert!(create(Kind::Tool, "Bad Name", Lang::Rust, &root.join("x")).is_err());
        assert!(create(Kind::Tool, "demo", Lang::Rust, &root.join("Tool-Rust")).is_err());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn writes_every_wit_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.path().extension().is_some_and(|x| x == "wit"))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let written: Vec<&str> = WIT_FILES.iter().map(|(file, _)| *file).collect();
        assert_eq!(files, written);
    }

    #[test]
    fn writes_every_vendored_wit_dep() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/deps");
        let mut vendored: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        vendored.sort();
        let written: Vec<&str> = WIT_DEPS.iter().map(|(file, _)| *file).collect();
        assert_eq!(vendored, written);
    }
}
