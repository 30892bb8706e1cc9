//! Plain components: a component written for no `hangar:plugin` world, whose
//! exported functions are its tools. Reflection (`component_type()`) finds
//! the functions; `schema.rs` derives each one's JSON Schemas from its WIT
//! types; `convert.rs` checks the call's JSON against them, and `abi/`
//! lowers it into the guest and lifts the result back as JSON, in bulk and
//! within `max_output_bytes`. Everything else (limits, grants, a fresh
//! instance per call) is the `ToolPlugin`'s, as for any other tool.

mod abi;
mod convert;
mod docs;
pub mod schema;

use serde_json::Value;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, ComponentExportIndex, Instance, Type};
use wasmtime::{AsContextMut, Engine};

pub use abi::OutputTooLarge;
pub use docs::PackageDocs;
use hangar_core::call::{Content, ToolDef, ToolResult};
use schema::Way;

/// One exported function, ready to be called by its export index.
pub struct PlainFunc {
    /// Its name inside the plugin: `f` at world level, `interface.f` in an
    /// exported interface.
    pub path: String,
    export: ComponentExportIndex,
    params: Vec<(String, Type)>,
    result: Option<Type>,
    def: ToolDef,
}

/// The functions of a plain component, and the ones it exports that cannot
/// be tools (a resource or a stream in their signature), with why.
#[derive(Default)]
pub struct PlainExports {
    funcs: Vec<PlainFunc>,
    pub problems: Vec<String>,
}

impl PlainExports {
    /// Finds every exported function of `component`, at world level or in an
    /// exported interface. Interfaces of the `wasi:` namespace are the
    /// platform's (`wasi:http/incoming-handler`, `wasi:cli/run`), not tools.
    pub fn reflect(component: &Component, engine: &Engine, docs: &PackageDocs) -> PlainExports {
        let mut out = PlainExports::default();
        let ty = component.component_type();
        for (name, item) in ty.exports(engine) {
            match item.ty {
                ComponentItem::ComponentFunc(func) => {
                    let export = component.get_export_index(None, name);
                    out.add(name.to_string(), export, &func, docs);
                }
                ComponentItem::ComponentInstance(instance)
                    if !name.starts_with("wasi:")
                        && !is_toolchain_hook(name, &instance, engine) =>
                {
                    let Some(iface) = component.get_export_index(None, name) else {
                        continue;
                    };
                    let short = interface_name(name);
                    for (fname, item) in instance.exports(engine) {
                        if let ComponentItem::ComponentFunc(func) = item.ty {
                            let export = component.get_export_index(Some(&iface), fname);
                            out.add(format!("{short}.{fname}"), export, &func, docs);
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn add(
        &mut self,
        path: String,
        export: Option<ComponentExportIndex>,
        func: &wasmtime::component::types::ComponentFunc,
        docs: &PackageDocs,
    ) {
        // `[constructor]r`, `[method]r.f`, `[static]r.f`: a resource's
        // functions, which live on its handles, not tools.
        if path.contains('[') {
            self.problems.push(format!(
                "function {path}: a resource's function; resources are not served as tools"
            ));
            return;
        }
        let Some(export) = export else {
            self.problems
                .push(format!("function {path}: not found by its export name"));
            return;
        };
        let params: Vec<(String, Type)> = func.params().map(|(n, t)| (n.to_string(), t)).collect();
        let result = func.results().next();
        let why = params
            .iter()
            .map(|(_, t)| t)
            .chain(result.as_ref())
            .find_map(schema::unsupported);
        if let Some(why) = why {
            self.problems.push(format!(
                "function {path}: its signature has {why}, which JSON cannot carry; not served \
                 (the component's other functions are)"
            ));
            return;
        }
        let def = tool_def(&path, &params, result.as_ref(), docs);
        self.funcs.push(PlainFunc {
            path,
            export,
            params,
            result,
            def,
        });
    }

    /// The tools, named by their path inside the plugin.
    pub fn defs(&self) -> Vec<ToolDef> {
        self.funcs.iter().map(|f| f.def.clone()).collect()
    }

    pub fn func(&self, path: &str) -> Option<&PlainFunc> {
        self.funcs.iter().find(|f| f.path == path)
    }

    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }
}

impl PlainFunc {
    /// Checks the call's arguments against the function's parameters, before
    /// any instance is spent on a call that cannot be made.
    pub fn check_arguments(&self, args: &Value) -> Result<(), String> {
        convert::arguments(args, &self.params)
    }

    /// Calls the function in `instance` with `args` (checked already): its
    /// result as JSON (`None` when it returns nothing), refused with
    /// [`OutputTooLarge`] as soon as that JSON would pass `max_output_bytes`.
    pub async fn call<S>(
        &self,
        mut store: S,
        instance: &Instance,
        args: &Value,
        max_output_bytes: u64,
    ) -> wasmtime::Result<Option<Value>>
    where
        S: AsContextMut<Data: Send>,
    {
        let f = instance
            .get_func(&mut store, self.export)
            .ok_or_else(|| wasmtime::format_err!("function {} is not exported", self.path))?;
        let args = abi::Args::new(args, self.params.iter().map(|(n, _)| n.as_str()));
        if self.result.is_none() {
            let typed = f.typed::<abi::Args<'_>, ()>(&store)?;
            typed.call_async(&mut store, args).await?;
            return Ok(None);
        }
        let typed = f.typed::<abi::Args<'_>, abi::Ret>(&store)?;
        let call = typed.call_async(&mut store, args);
        let abi::Ret(value) = abi::with_output_limit(max_output_bytes, call).await?;
        Ok(Some(value))
    }

    /// What the function returned (its JSON), as MCP's result: a `result`'s
    /// `err` is an error result (`isError`), anything else the tool's answer.
    pub fn tool_result(&self, returned: Option<Value>) -> ToolResult {
        let (Some(ty), Some(value)) = (&self.result, returned) else {
            return no_value();
        };
        let (value, ty) = match (ty, value) {
            (Type::Result(rt), Value::Object(mut side)) => {
                if let Some(e) = side.remove("err") {
                    let text = match rt.err() {
                        Some(_) => text_of(&e),
                        None => "error".to_string(),
                    };
                    return ToolResult::error(text);
                }
                match (rt.ok(), side.remove("ok")) {
                    (Some(ok), Some(v)) => (v, ok),
                    _ => return no_value(),
                }
            }
            (ty, value) => (value, ty.clone()),
        };
        let text = text_of(&value);
        let structured = match ty {
            Type::Record(_) => value,
            _ => serde_json::json!({ "result": value }),
        };
        ToolResult {
            content: vec![Content::Text { text }],
            structured_content: Some(structured),
            is_error: false,
            meta: None,
        }
    }
}

/// The result of a function that returned nothing.
fn no_value() -> ToolResult {
    ToolResult {
        content: Vec::new(),
        structured_content: None,
        is_error: false,
        meta: None,
    }
}

/// A value as a text block: a string as itself, anything else as JSON.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// componentize-py leaves its build-time pre-initialisation hook exported
/// in every component it builds: an instance `exports` whose one function is
/// `init(app-name, symbols, stub-wasi)`. It is the toolchain's, not a tool.
fn is_toolchain_hook(
    name: &str,
    instance: &wasmtime::component::types::ComponentInstance,
    engine: &Engine,
) -> bool {
    if name != "exports" {
        return false;
    }
    let funcs: Vec<_> = instance
        .exports(engine)
        .filter_map(|(fname, item)| match item.ty {
            ComponentItem::ComponentFunc(f) => Some((fname, f)),
            _ => None,
        })
        .collect();
    matches!(funcs.as_slice(), [(fname, f)]
        if *fname == "init" && f.params().next().is_some_and(|(p, _)| p == "app-name"))
}

/// `ns:pkg/iface@1.0.0` → `iface`.
fn interface_name(export: &str) -> &str {
    let no_version = export.split('@').next().unwrap_or(export);
    no_version.rsplit('/').next().unwrap_or(no_version)
}

fn tool_def(
    path: &str,
    params: &[(String, Type)],
    result: Option<&Type>,
    docs: &PackageDocs,
) -> ToolDef {
    let input_schema = schema::object(params.iter().cloned(), Way::In);
    let ok = match result {
        Some(Type::Result(r)) => r.ok(),
        other => other.cloned(),
    };
    let output_schema = ok.as_ref().map(schema::output);
    let description = docs
        .func(path)
        .map(str::to_string)
        .unwrap_or_else(|| signature(path, params, result));
    let short = path.rsplit('.').next().unwrap_or(path);
    ToolDef {
        name: path.to_string(),
        title: Some(title(short)),
        description,
        input_schema,
        output_schema,
        annotations: None,
        meta: None,
    }
}

/// `fetch(url: string) -> result<string, string>`.
fn signature(path: &str, params: &[(String, Type)], result: Option<&Type>) -> String {
    let name = path.rsplit('.').next().unwrap_or(path);
    let params: Vec<String> = params
        .iter()
        .map(|(n, t)| format!("{n}: {}", schema::wit_name(t)))
        .collect();
    match result {
        Some(t) => format!("{name}({}) -> {}", params.join(", "), schema::wit_name(t)),
        None => format!("{name}({})", params.join(", ")),
    }
}

/// `get-weather` → `Get Weather`.
fn title(name: &str) -> String {
    name.split(['-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(title("get-weather"), "Get Weather");
        assert_eq!(title("fetch"), "Fetch");
        assert_eq!(interface_name("wassette:fetch/fetcher@0.1.0"), "fetcher");
        assert_eq!(interface_name("types"), "types");
    }
}
