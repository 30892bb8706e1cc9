//! `hangar check`: the config validated and every plugin loaded without
//! serving, then what was found printed (components, what they ask and are
//! granted, tools, resources, prompts, toolsets, warnings, problems).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use hangar::Hangar;

use crate::load_config;

pub(crate) async fn check(path: &Path, plugins: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let (config, _) = load_config(path, plugins)?;
    println!("config: {}", path.display());
    println!("plugins: {}", config.server.plugins.display());
    let hangar = Hangar::load(config).await?;
    for entry in &hangar.report.loaded {
        let origin = match entry.origin {
            hangar_runtime::Origin::Cache => "from cache",
            hangar_runtime::Origin::Compiled => "compiled",
        };
        let kind = match entry.world {
            hangar_runtime::World::Plain => {
                "plain component: its exports are its tools".to_string()
            }
            world => format!("{} world", world.as_str()),
        };
        println!("  ok    {} ({kind}, {origin})", entry.path.display());
        if let Some(source) = hangar.report.sources.iter().find(|s| s.name == entry.name) {
            println!("        plugin {}", source.name);
            println!("        source {}", source.source);
            println!("        digest {}", source.digest);
            println!("        from   {}", source.fetched.as_str());
            let granted = hangar.config.plugins.get(&entry.name).map(|p| &p.grants);
            match hangar::registry::requests(&hangar.config, &source.digest) {
                Ok(Some(asked)) => {
                    for line in hangar::requests::lines(&asked, granted) {
                        println!("        {line}");
                    }
                }
                Ok(None) => println!(
                    "        requests nothing stated (no {} annotation)",
                    hangar::registry::REQUESTS_ANNOTATION
                ),
                Err(e) => println!("        requests unknown: {e}"),
            }
            println!("        signature {}", source.signature.describe());
        } else if !hangar.config.trust.loaded.is_empty()
            || hangar.config.trust.require != hangar_config::Require::None
        {
            println!("        signature local file (unverified)");
        }
        for line in entry.capability_lines(hangar.config.plugins.get(&entry.name)) {
            println!("        {line}");
        }
    }
    let pipeline = hangar.pipeline.current();
    for tool in pipeline.catalog().tools() {
        println!("  tool  {} ({})", tool.def.name, tool.source.display());
        if let Some(app) = hangar::catalog::apps::describe_app(tool.current_def().meta.as_ref()) {
            println!("        {app}");
        }
        // A plain component's schemas are derived here, not written by its
        // author: show them.
        if let hangar::catalog::Backend::Wasm { plugin, .. } = &tool.backend
            && plugin.is_typed()
        {
            println!("        input  {}", tool.def.input_schema);
            if let Some(output) = &tool.def.output_schema {
                println!("        output {output}");
            }
        }
    }
    let offered = pipeline.catalog().offered();
    let source = |provider: &hangar::catalog::Provider| match provider {
        hangar::catalog::Provider::Wasm(plugin) => format!("plugin {}", plugin.name()),
        hangar::catalog::Provider::Sql(_) => "hangar.toml".to_string(),
        hangar::catalog::Provider::Upstream(u) => format!("upstream {}", u.name),
    };
    for r in &offered.resources {
        println!("  resource {} ({})", r.def.uri, source(&r.provider));
    }
    for t in &offered.templates {
        println!(
            "  template {} ({})",
            t.def.uri_template,
            source(&t.provider)
        );
    }
    for p in &offered.prompts {
        println!("  prompt {} ({})", p.def.name, source(&p.provider));
    }
    for p in &hangar.problems {
        println!("  error {}: {}", p.path.display(), p.error);
    }
    let catalog = pipeline.catalog();
    for name in catalog.toolsets().names() {
        let tools = catalog.toolset_tools(name, None);
        println!("  toolset {name} ({tools} tools; /mcp/{name}, /toolsets/{name}/tools)");
    }
    for w in hangar
        .config
        .warnings()
        .into_iter()
        .chain(catalog.toolset_warnings())
        .chain(catalog.app_warnings())
    {
        println!("  warning {w}");
    }
    println!(
        "{} components ({} from cache, {} compiled), {} tools, {} resources, {} templates, {} prompts, {} problems",
        hangar.report.loaded.len(),
        hangar.report.from_cache,
        hangar.report.compiled,
        pipeline.catalog().tools().len(),
        offered.resources.len(),
        offered.templates.len(),
        offered.prompts.len(),
        hangar.problems.len()
    );
    Ok(if hangar.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
