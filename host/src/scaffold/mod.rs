//! `hangar new`: writes a minimal, buildable plugin project and a `build.sh`
//! for a tool, an auth check or a mapper, in Rust, Python or JavaScript; with
//! `--http`, a tool that calls a JSON API through `wasi:http` (Rust with
//! `wstd`, JavaScript with `fetch`, Python with a small client over
//! componentize-py's `wasi:http` bindings).
//!
//! A Rust project depends on `hangar-sdk` by version and uses its macros,
//! like the examples in `plugins/`: one way to write a Rust plugin, with the
//! WIT inside the SDK crate. Python and JavaScript build from WIT files on
//! disk, so their projects get the same `hangar:plugin` package the SDK
//! ships (`sdk/wit` is a link to the repository's `wit/`, embedded here).

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
/// `client` interface every tool world imports): the repository's `wit/`,
/// which the `hangar-sdk` crate ships as its `wit/` (a link), so a Python or
/// JavaScript project builds against the very package a Rust one gets.
const WIT_FILES: &[(&str, &str)] = &[
    ("code.wit", include_str!("../../../wit/code.wit")),
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
/// The `hangar-sdk` version a Rust project depends on: the workspace's, which
/// the SDK shares (`version.workspace = true`, checked by a test below).
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

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
    create_with(kind, name, lang, dir, false, None)
}

/// [`create`], and with `http` a tool that calls a JSON API (`hangar new
/// tool NAME --http`): its config key `base_url`, reached under the
/// plugin's `grants = { http = [...] }`. With `sdk` (`--sdk DIR`, Rust
/// only) the project builds against the `hangar-sdk` crate in that folder
/// (a Hangar checkout's `sdk/` or an unpacked `.crate`) through a
/// `[patch.crates-io]` table, instead of the one on crates.io.
pub fn create_with(
    kind: Kind,
    name: &str,
    lang: Lang,
    dir: &Path,
    http: bool,
    sdk: Option<&Path>,
) -> anyhow::Result<String> {
    anyhow::ensure!(
        !http || kind == Kind::Tool,
        "--http writes a tool; leave it out for an auth check or a mapper"
    );
    anyhow::ensure!(
        sdk.is_none() || lang == Lang::Rust,
        "--sdk is for Rust projects; a Python or JavaScript one gets the WIT written into it"
    );
    let sdk = sdk.map(sdk_crate).transpose()?;
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
    std::fs::create_dir_all(dir)?;
    if lang != Lang::Rust {
        write_wit(&dir.join("wit"))?;
    }
    std::fs::write(dir.join("README.md"), readme(kind, name, lang, http))?;
    let world = world(kind, lang, http);
    let code = template.replace("{{name}}", name);
    let build = match lang {
        Lang::Rust => {
            std::fs::create_dir_all(dir.join("src"))?;
            std::fs::write(dir.join("src/lib.rs"), code)?;
            std::fs::write(
                dir.join("Cargo.toml"),
                cargo_toml(kind, name, http, sdk.as_deref()),
            )?;
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

/// Writes the `hangar:plugin` WIT package (and the WASI packages it refers
/// to, in `deps/`) into `dir`.
fn write_wit(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir.join("deps"))?;
    for (file, text) in WIT_FILES {
        std::fs::write(dir.join(file), text)?;
    }
    for (file, text) in WIT_DEPS {
        std::fs::write(dir.join("deps").join(file), text)?;
    }
    Ok(())
}

/// The absolute path of the `hangar-sdk` crate in `dir`, or why it is not one.
fn sdk_crate(dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    let manifest = dir.join("Cargo.toml");
    let package = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
        .and_then(|t| t.get("package")?.get("name")?.as_str().map(str::to_owned));
    anyhow::ensure!(
        package.as_deref() == Some("hangar-sdk"),
        "--sdk {}: {} is not the manifest of the hangar-sdk crate",
        dir.display(),
        manifest.display()
    );
    Ok(std::fs::canonicalize(dir)?)
}

fn cargo_toml(kind: Kind, name: &str, http: bool, sdk: Option<&Path>) -> String {
    let dependency = match kind {
        // `tool` is the SDK's default feature.
        Kind::Tool => format!("hangar-sdk = \"{SDK_VERSION}\""),
        Kind::Auth | Kind::Mapper => {
            let feature = if kind == Kind::Auth { "auth" } else { "mapper" };
            format!(
                "hangar-sdk = {{ version = \"{SDK_VERSION}\", default-features = false, features = [\"{feature}\"] }}"
            )
        }
    };
    let serde = if kind == Kind::Tool {
        "serde = { version = \"1\", features = [\"derive\"] }\n"
    } else {
        ""
    };
    let http = if http {
        "# Outbound HTTP over wasi:http/outgoing-handler.\nwstd = \"0.6\"\n"
    } else {
        ""
    };
    let patch = match sdk {
        Some(dir) => format!(
            "# The SDK from a local folder (`hangar new --sdk`), not crates.io.\n\
             [patch.crates-io]\nhangar-sdk = {{ path = {} }}\n",
            toml::Value::String(dir.display().to_string())
        ),
        None => "# To build against a checkout of Hangar's SDK instead of crates.io:\n\
                 # [patch.crates-io]\n# hangar-sdk = { path = \"/path/to/hangar/sdk\" }\n"
            .to_string(),
    };
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib"]

[dependencies]
# The WIT, its bindings and the helpers; see README.md.
{dependency}
{serde}{http}
[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
strip = true

# A project of its own, even inside another workspace.
[workspace]

{patch}"#
    )
}

/// The project's README: how to build it, where its WIT comes from, and
/// what to put in `hangar.toml`.
fn readme(kind: Kind, name: &str, lang: Lang, http: bool) -> String {
    let what = match (kind, http) {
        (Kind::Tool, true) => "a tool that calls a JSON API over `wasi:http`",
        (Kind::Tool, false) => "a tool",
        (Kind::Auth, _) => "an auth check",
        (Kind::Mapper, _) => "a mapper",
    };
    let source = match lang {
        Lang::Rust => format!(
            "`src/lib.rs` is written with `hangar-sdk` \
{SDK_VERSION}, which carries the `hangar:plugin` WIT package and its bindings: the project \
has no WIT of its own. To build against a Hangar checkout instead of crates.io (as long as \
`hangar-sdk` is not published there, the only way), write the project with \
`hangar new --sdk /path/to/hangar/sdk`, or set the `[patch.crates-io]` table at the end of \
`Cargo.toml` by hand."
        ),
        Lang::Python => "`app.py` is built with componentize-py (`$COMPONENTIZE_PY`, or \
`componentize-py` on the PATH) against `wit/`: the `hangar:plugin` package `hangar new` \
wrote, the same one the Rust SDK `hangar-sdk` ships, with the WASI packages it refers \
to in `wit/deps/`."
            .to_string(),
        Lang::Js => "`app.js` is built with componentize-js (`npm install` fetches it; or \
`$COMPONENTIZE_JS_CLI`) against `wit/`: the `hangar:plugin` package `hangar new` wrote, \
the same one the Rust SDK `hangar-sdk` ships, with the WASI packages it refers to in \
`wit/deps/`."
            .to_string(),
    };
    let config = match (kind, http) {
        (Kind::Tool, true) => format!(
            "\n```toml\n[plugins.{name}]\nconfig = {{ base_url = \"https://api.example.org\" }}\n\
grants = {{ http = [\"api.example.org\"] }}\n```\n"
        ),
        (Kind::Tool, false) => String::new(),
        (Kind::Auth, _) => format!(
            "\n```toml\n[plugins.{name}]\nconfig = {{ token = \"{{{{ env.MY_TOKEN }}}}\" }}\n\n\
[[tools]]\nname = \"some-tool\"\nauth = {{ plugin = \"{name}\" }}\n```\n"
        ),
        (Kind::Mapper, _) => format!(
            "\n```toml\n[[tools]]\nname = \"some-tool\"\nmappers = {{ output = \"{name}\" }}   # or input\n```\n"
        ),
    };
    format!(
        "# {name}\n\n`{name}` is {what} for Hangar, written by `hangar new`.\n\n\
{source}\n\n## Build and install\n\n```sh\n./build.sh\ncp {name}.wasm /path/to/hangar/plugins/\n\
hangar check   # lists it\n```\n{config}\nSee the plugin authors' guide, `docs/plugins.md` in Hangar.\n"
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
                assert!(dir.join("README.md").exists());
                // Rust gets the WIT inside the SDK crate; the others on disk.
                assert_eq!(dir.join("wit").exists(), lang != Lang::Rust);
                assert_eq!(dir.join("wit/worlds.wit").exists(), lang != Lang::Rust);
                let all: String = std::fs::read_dir(&dir)
                    .unwrap()
                    .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
                    .collect();
                assert!(!all.contains("{{name}}"));
            }
        }
        for lang in [Lang::Rust, Lang::Js, Lang::Python] {
            let dir = root.join(format!("http-{lang:?}"));
            create_with(Kind::Tool, "demo", lang, &dir, true, None).unwrap();
            let src = dir.join("src");
            let all: String = std::fs::read_dir(&dir)
                .unwrap()
                .chain(std::fs::read_dir(&src).into_iter().flatten())
                .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
                .collect();
            assert!(!all.contains("{{name}}"));
            assert!(all.contains("base_url"));
        }
        let http_rust = std::fs::read_to_string(root.join("http-Rust/Cargo.toml")).unwrap();
        assert!(http_rust.contains("wstd"));
        assert!(http_rust.contains(&format!("hangar-sdk = \"{SDK_VERSION}\"\n")));
        assert!(!http_rust.contains("wit-bindgen"));
        let tool = std::fs::read_to_string(root.join("Tool-Rust/Cargo.toml")).unwrap();
        assert!(tool.contains(&format!("hangar-sdk = \"{SDK_VERSION}\"\n")));
        assert!(!tool.contains("wit-bindgen"));
        let auth = std::fs::read_to_string(root.join("Auth-Rust/Cargo.toml")).unwrap();
        assert!(auth.contains(&format!(
            "hangar-sdk = {{ version = \"{SDK_VERSION}\", default-features = false, features = [\"auth\"] }}"
        )));
        let mapper = std::fs::read_to_string(root.join("Mapper-Rust/src/lib.rs")).unwrap();
        assert!(mapper.contains("hangar_sdk::export_mapper!(Plugin);"));
        for toml in [&http_rust, &tool, &auth] {
            toml.parse::<toml::Table>().expect("Cargo.toml parses");
        }
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
                true,
                None
            )
            .is_err()
        );
        assert!(create(Kind::Tool, "Bad Name", Lang::Rust, &root.join("x")).is_err());
        assert!(create(Kind::Tool, "demo", Lang::Rust, &root.join("Tool-Rust")).is_err());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn sdk_points_a_rust_project_at_a_local_crate() {
        let root = std::env::temp_dir().join(format!("hangar-scaffold-sdk-{}", std::process::id()));
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
        create_with(
            Kind::Mapper,
            "demo",
            Lang::Rust,
            &root.join("ok"),
            false,
            Some(&sdk),
        )
        .unwrap();
        let manifest: toml::Table = std::fs::read_to_string(root.join("ok/Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let path = &manifest["patch"]["crates-io"]["hangar-sdk"]["path"];
        assert_eq!(
            path.as_str().map(Path::new),
            Some(std::fs::canonicalize(&sdk).unwrap().as_path())
        );
        let host = Path::new(env!("CARGO_MANIFEST_DIR"));
        let err = create_with(
            Kind::Tool,
            "demo",
            Lang::Rust,
            &root.join("no"),
            false,
            Some(host),
        );
        assert!(
            err.unwrap_err()
                .to_string()
                .ends_with("Cargo.toml is not the manifest of the hangar-sdk crate")
        );
        assert!(!root.join("no").exists());
        let py = create_with(
            Kind::Tool,
            "demo",
            Lang::Python,
            &root.join("py"),
            false,
            Some(&sdk),
        );
        assert!(py.is_err());
        std::fs::remove_dir_all(root).unwrap();
    }

    /// The WIT `hangar new` writes for Python and JavaScript is the package
    /// the SDK crate ships: `sdk/wit` is the repository's `wit/`.
    #[test]
    fn the_sdk_ships_the_wit_written_here() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let shipped = std::fs::canonicalize(root.join("sdk/wit")).unwrap();
        assert_eq!(shipped, std::fs::canonicalize(root.join("wit")).unwrap());
        for (file, text) in WIT_FILES {
            assert_eq!(std::fs::read_to_string(shipped.join(file)).unwrap(), *text);
        }
    }

    /// Rust projects depend on `hangar-sdk = SDK_VERSION`: the SDK must
    /// carry the workspace version, as the host does.
    #[test]
    fn the_sdk_has_the_workspace_version() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let sdk: toml::Table = std::fs::read_to_string(root.join("sdk/Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(sdk["package"]["version"]["workspace"].as_bool(), Some(true));
        let host: toml::Table = std::fs::read_to_string(root.join("host/Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            host["package"]["version"]["workspace"].as_bool(),
            Some(true)
        );
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
