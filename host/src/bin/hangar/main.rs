//! The `hangar` command: `serve`, `check`, `config`, `new`, `pull`, `push`,
//! `sign`, `token` and `probe`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

mod check;

use clap::{Parser, Subcommand};
use hangar::reload::{ConfigSource, Reloader, watch};
use hangar::{Hangar, server};
use hangar_config::Config;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

/// mimalloc instead of glibc's malloc: a call allocates and frees many
/// small objects on two threads, and glibc's arenas spent about a sixth of
/// the echo profile's samples in malloc, free and consolidation. Its arenas
/// are built without transparent huge pages (`no_thp`, host/Cargo.toml),
/// which kept the idle RSS where glibc's was. Large blocks go back to the
/// OS after mimalloc's purge delay, so one big guest result does not stay
/// resident (glibc needed a fixed mmap threshold for that).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How often freed memory whose purge delay has passed is handed back.
const PURGE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// mimalloc returns a freed block's memory to the OS once its purge delay
/// (1 s) has passed, but only when some thread next calls into the
/// allocator on certain slow paths: a server that answered a few huge
/// results and then idles, or serves only small calls, kept them resident
/// (measured by `scripts/abuse`: 5 abandoned 24 MB answers left RSS at
/// 243 MiB instead of 33). This thread asks for that purge every
/// [`PURGE_EVERY`]. Purging at free time instead (`purge_delay = 0`)
/// would put an madvise on the hot path.
fn start_purger() {
    std::thread::Builder::new()
        .name("hangar-purge".into())
        .spawn(|| {
            loop {
                std::thread::sleep(PURGE_EVERY);
                // SAFETY: mi_collect takes no pointers; `false` does only
                // the cheap collection (expired purges, this thread's heap).
                unsafe { libmimalloc_sys::mi_collect(false) };
            }
        })
        .expect("spawn the purge thread");
}

/// How often at most a runtime worker that goes idle collects its heap.
const WORKER_COLLECT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The purger's collection hands back what it can reach, but memory a
/// worker's heap freed is purged (after mimalloc's 1 s purge delay) only
/// when that worker next collects, and a worker that freed a big result
/// and then went idle never did: after `scripts/abuse`'s floods
/// the server stayed 8–26 MiB above where it began (goal 16), most of it
/// in mimalloc's arena. So a worker that parks collects its heap, delayed
/// purges included (`force`), at most every [`WORKER_COLLECT_EVERY`]: a
/// park can follow every call, and purging at free time instead
/// (`purge_delay = 0`) made one echo call in 18 `madvise` a page it would
/// soon fault back in.
fn collect_on_park() {
    use std::cell::Cell;
    use std::time::Instant;
    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    LAST.with(|last| {
        if last
            .get()
            .is_none_or(|at| now.duration_since(at) >= WORKER_COLLECT_EVERY)
        {
            last.set(Some(now));
            // SAFETY: no pointers; collects this thread's heap.
            unsafe { libmimalloc_sys::mi_collect(true) };
        }
    });
}

#[derive(Parser)]
#[command(
    name = "hangar",
    // `hangar --version`: the release and the commit it was built from.
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("HANGAR_COMMIT"), ")"),
    about = "An MCP server whose tools are WebAssembly components"
)]
struct Cli {
    /// How log lines are written to stderr: `text`, or `json` (one object a line).
    #[arg(
        long,
        global = true,
        value_enum,
        env = "HANGAR_LOG_FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logs to stderr: colour only on a terminal, JSON lines when asked.
///
/// `serve` hands its lines to a thread of its own (tracing-appender's
/// non-blocking writer, over a buffered stderr), which writes what has
/// queued up in one go. Written in place, every call's access line was a
/// `write` under stderr's lock on the worker that ran the call: measured with
/// the log in a file, the two workers of a busy server spent a quarter of
/// their time in those writes and in handing the lock to each other. No line
/// is dropped: with 128k lines queued, a worker waits for room. The returned
/// guard writes what is queued when it is dropped.
fn init_logging(format: LogFormat, background: bool) -> Option<WorkerGuard> {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,wasmtime=warn,cranelift=warn".into());
    let (writer, guard) = if background {
        let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(false)
            .thread_name("hangar-log")
            .finish(std::io::BufWriter::with_capacity(
                64 << 10,
                std::io::stderr(),
            ));
        (BoxMakeWriter::new(writer), Some(guard))
    } else {
        (BoxMakeWriter::new(std::io::stderr), None)
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
            .init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    guard
}

#[derive(Subcommand)]
enum Command {
    /// Load the plugins and serve MCP and REST over HTTP (and MCP on stdin
    /// and stdout with `--stdio`).
    Serve {
        /// The config file (or `HANGAR_CONFIG`; a flag wins over its variable).
        #[arg(long, env = "HANGAR_CONFIG", default_value = "hangar.toml")]
        config: PathBuf,
        /// Address to listen on (default 127.0.0.1:8080, or `server.listen`;
        /// with `--stdio`, HTTP is served only when this is given).
        #[arg(long, env = "HANGAR_LISTEN")]
        listen: Option<SocketAddr>,
        /// Serve MCP on stdin and stdout, one JSON-RPC message a line (logs
        /// stay on stderr); the end of stdin ends the process. `HANGAR_TOKEN`,
        /// if set, is what the auth stage sees as the bearer token.
        #[arg(long)]
        stdio: bool,
        /// Plugins directory (default `plugins/`, or `server.plugins`).
        #[arg(long, env = "HANGAR_PLUGINS")]
        plugins: Option<PathBuf>,
    },
    /// Write a minimal plugin project (Rust: on hangar-sdk; Python, JS: the WIT
    /// included) and print its build command.
    New {
        /// tool, auth or mapper
        #[arg(value_enum)]
        kind: hangar::scaffold::Kind,
        name: String,
        #[arg(long, value_enum, default_value = "rust")]
        lang: hangar::scaffold::Lang,
        /// Where to write it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// A tool that calls a JSON API over wasi:http (Rust, Python or JavaScript).
        #[arg(long)]
        http: bool,
        /// Rust: build against the hangar-sdk crate in this folder (a Hangar
        /// checkout's `sdk/`, or an unpacked .crate) instead of crates.io.
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
    /// Validate the config and load every plugin without serving; exits
    /// non-zero on any problem.
    Check {
        #[arg(long, env = "HANGAR_CONFIG", default_value = "hangar.toml")]
        config: PathBuf,
        #[arg(long, env = "HANGAR_PLUGINS")]
        plugins: Option<PathBuf>,
    },
    /// Describes the config file: `--schema` prints the JSON Schema of
    /// `hangar.toml` (every table and key, with its type, default and
    /// description) to stdout, for editors and validators.
    Config {
        /// Print the JSON Schema (2020-12), pretty-printed.
        #[arg(long, required = true)]
        schema: bool,
    },
    /// Pulls every plugin with an `oci://` source into the cache directory.
    Pull {
        #[arg(long, env = "HANGAR_CONFIG", default_value = "hangar.toml")]
        config: PathBuf,
    },
    /// Personal tokens, for clients that cannot do OAuth: `create`, `list`,
    /// `revoke` (in the config's kv store, so beside a running server).
    Token {
        #[arg(
            long,
            global = true,
            env = "HANGAR_CONFIG",
            default_value = "hangar.toml"
        )]
        config: PathBuf,
        #[command(subcommand)]
        action: hangar_core::accounts::TokenCommand,
    },
    /// Pushes a component as a Wasm OCI artifact; prints the manifest digest.
    Push {
        /// The component (`.wasm`).
        file: PathBuf,
        /// Where to: `oci://host:port/repository:tag`.
        target: String,
        /// Its `[registries]` (insecure registries, credentials) apply.
        #[arg(long, default_value = "hangar.toml")]
        config: PathBuf,
        /// A TOML file of the grants the component asks for (`http = [...]`,
        /// `credentials = [...]`), pushed as the `dev.hangar.requests`
        /// annotation; an operator's `hangar check` shows it beside their
        /// grants. Nothing is granted from it.
        #[arg(long)]
        requests: Option<PathBuf>,
        /// Also sign the pushed manifest with this PEM PKCS#8 private key
        /// (ECDSA P-256 or Ed25519), pushed as cosign does (`sha256-<hex>.sig`).
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
    },
    /// Signs what `oci://host:port/repository:tag` names now (an image
    /// `scripts/image --push` pushed, say) as `push --sign` does; prints
    /// the signed digest.
    Sign {
        target: String,
        /// The PEM PKCS#8 private key (ECDSA P-256 or Ed25519).
        #[arg(long, value_name = "KEY")]
        key: PathBuf,
        /// Its `[registries]` (insecure registries, credentials) apply.
        #[arg(long, default_value = "hangar.toml")]
        config: PathBuf,
    },
    /// One `GET` of a running server's probe, for a container's health
    /// check: exits 0 on 200, else 1 saying what came.
    Probe {
        /// The server's address; an unspecified one (`0.0.0.0`) is asked on loopback.
        #[arg(long, env = "HANGAR_LISTEN", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        #[arg(long, default_value = "/livez")]
        path: String,
    },
}

fn main() -> ExitCode {
    // reqwest is built without a TLS provider of its own (the upstream
    // client is handed Hangar's rustls config); the OTLP exporter's client
    // is not, so it takes the process default: ring, as everywhere else.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    if let Command::Probe { listen, path } = &cli.command {
        return match hangar::server::probe(*listen, path, std::time::Duration::from_secs(3)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("probe: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let logging = init_logging(cli.log_format, matches!(cli.command, Command::Serve { .. }));
    if matches!(cli.command, Command::Serve { .. }) {
        start_purger();
    }
    // Before the async runtime: the trace exporter posts from a thread of its own.
    let traces = match &cli.command {
        Command::Serve { .. } => hangar::traces::init().unwrap_or_else(|e| {
            tracing::error!("traces are off: {e}");
            None
        }),
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // A worker with nothing to do hands over the spans it gathered,
        // tears down the instances its calls are done with, and collects
        // its heap.
        .on_thread_park(|| {
            hangar::traces::on_park();
            hangar_runtime::on_park();
            collect_on_park();
        })
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve {
                config,
                listen,
                plugins,
                stdio,
            } => serve(&config, listen, plugins, stdio).await,
            Command::Check { config, plugins } => check::check(&config, plugins).await,
            Command::Pull { config } => pull(&config).await,
            Command::Token { config, action } => {
                let (config, _) = load_config(&config, None)?;
                action.run(&config).await
            }
            Command::Config { schema: _ } => {
                let schema = serde_json::to_string_pretty(&Config::schema())?;
                println!("{schema}");
                Ok(ExitCode::SUCCESS)
            }
            Command::Push {
                file,
                target,
                config,
                requests,
                sign,
            } => {
                let (config, _) = load_config(&config, None)?;
                let mut options = hangar::registry::PushOptions::default();
                if let Some(path) = requests {
                    let asked = hangar::registry::read_requests_file(&path)?;
                    hangar::requests::validate(&asked)
                        .map_err(|e| anyhow::anyhow!("--requests {}: {e}", path.display()))?;
                    options.requests = Some(asked);
                }
                // A key that cannot sign is found before anything is pushed.
                if let Some(key) = &sign {
                    hangar::registry::check_signing_key(key)?;
                }
                let digest = hangar::registry::push(&config, &file, &target, &options).await?;
                println!("{digest}");
                if let Some(key) = &sign {
                    let tag =
                        hangar::registry::push_signature(&config, &target, &digest, key).await?;
                    eprintln!("signed: {tag}");
                }
                Ok(ExitCode::SUCCESS)
            }
            Command::Sign {
                target,
                key,
                config,
            } => {
                let (config, _) = load_config(&config, None)?;
                let (digest, tag) = hangar::registry::sign(&config, &target, &key).await?;
                println!("{digest}");
                eprintln!("signed: {tag}");
                Ok(ExitCode::SUCCESS)
            }
            Command::Probe { .. } => unreachable!("answered before the runtime starts"),
            Command::New {
                kind,
                name,
                lang,
                dir,
                http,
                sdk,
            } => {
                let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
                let build =
                    hangar::scaffold::create_with(kind, &name, lang, &dir, http, sdk.as_deref())?;
                println!("wrote {}", dir.display());
                println!("build it with: {build}");
                println!(
                    "then copy {}/{name}.wasm into Hangar's plugins/ folder",
                    dir.display()
                );
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    // Calls still running past the shutdown grace are cancelled here, not awaited.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    if let Some(traces) = traces {
        traces.shutdown();
    }
    // The queued lines go out before the error below, not after it.
    drop(logging);
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The config at `path`; the default path may be absent (defaults apply).
fn load_config(path: &Path, plugins: Option<PathBuf>) -> anyhow::Result<(Config, ConfigSource)> {
    let source = ConfigSource {
        path: path.to_path_buf(),
        plugins,
    };
    if path == Path::new("hangar.toml") && !path.exists() {
        tracing::info!("no hangar.toml here; using defaults");
    }
    Ok((source.read()?, source))
}

async fn serve(
    path: &Path,
    listen: Option<SocketAddr>,
    plugins: Option<PathBuf>,
    stdio: bool,
) -> anyhow::Result<ExitCode> {
    let (config, source) = load_config(path, plugins)?;
    // With `--stdio`, HTTP only when `--listen` asks for it.
    let listen = match (listen, stdio) {
        (Some(listen), _) => Some(listen),
        (None, false) => Some(config.server.listen),
        (None, true) => None,
    };
    let stdio = stdio.then(|| hangar::mcp::StdioOptions {
        token: std::env::var("HANGAR_TOKEN").ok().filter(|t| !t.is_empty()),
        principal: config.server.stdio_principal.clone(),
        max_line_bytes: config.server.max_body_bytes,
        toolset: (config.server.default_toolset.as_deref()).map(hangar_core::call::Toolset::new),
    });
    let started = std::time::Instant::now();
    // Heard from here on: a stop during start-up ends the process there
    // (the loader's threads are left to the process's exit).
    let stop = server::Stop::listen();
    let hangar = tokio::select! {
        biased;
        () = stop.requested() => {
            tracing::info!("stopped during start-up, after {:?}", started.elapsed());
            return Ok(ExitCode::SUCCESS);
        }
        loaded = Hangar::load(config) => loaded?,
    };
    tracing::info!(
        components = hangar.report.loaded.len(),
        from_cache = hangar.report.from_cache,
        compiled = hangar.report.compiled,
        tools = hangar.pipeline.current().catalog().tools().len(),
        "loaded in {:?}",
        started.elapsed()
    );
    for p in &hangar.problems {
        tracing::error!(path = %p.path.display(), "{}", p.error);
    }
    for w in hangar.config.warnings() {
        tracing::warn!("{w}");
    }
    for w in hangar.pipeline.current().catalog().toolset_warnings() {
        tracing::warn!("{w}");
    }
    for w in hangar.pipeline.current().catalog().app_warnings() {
        tracing::warn!("{w}");
    }
    // Reloads (file changes, SIGHUP) run from here on, before the server
    // listens, so a SIGHUP never finds the default action (exit) in place.
    let plugins = hangar.config.server.plugins.clone();
    let _watch = watch::start(Arc::new(Reloader::new(&hangar, source)), &plugins);
    server::serve(&hangar, listen, stdio, &stop).await?;
    Ok(ExitCode::SUCCESS)
}

async fn pull(path: &Path) -> anyhow::Result<ExitCode> {
    let (config, _) = load_config(path, None)?;
    let resolution = hangar::registry::resolve(&config, hangar::registry::Contact::Always).await;
    for r in &resolution.resolved {
        println!(
            "  ok    {} {} {} (from {}){}",
            r.name,
            r.source,
            r.digest,
            r.fetched.as_str(),
            match r.signature {
                hangar::registry::SignatureStatus::NotChecked => String::new(),
                ref status => format!(" {}", status.describe()),
            }
        );
    }
    for p in &resolution.problems {
        println!("  error {}", p.message());
    }
    println!(
        "{} pulled, {} problems",
        resolution.resolved.len(),
        resolution.problems.len()
    );
    Ok(if resolution.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
