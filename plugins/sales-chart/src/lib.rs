//! `sales-chart`: an MCP App. `sales.chart` answers a year of monthly unit
//! sales per region (as text for the model, as `structuredContent` for the
//! view) and links the view `ui://sales-chart/view`, a self-contained HTML
//! page that charts it in SVG. The view's button asks the host to call
//! `sales.forecast`, a tool only the view sees (`visibility: ["app"]`).
//!
//! The figures are the plugin's own: a wasm tool cannot run SQL, and a
//! fixed year keeps the example honest and the same on every run.

use hangar_sdk::{
    APP_MIME_TYPE, CallContext, CallResult, Completion, Meta, Prompts, ResourceDefinition,
    ResourceError, ResourceItem, Resources, Tool, ToolDefinition, ToolError, Value, app_tool_meta,
    app_view_meta, json, parse_args,
};
use serde::Deserialize;

const VIEW_URI: &str = "ui://sales-chart/view";
const VIEW: &str = include_str!("view.html");

const MONTHS: [&str; 12] = [
    "2026-01", "2026-02", "2026-03", "2026-04", "2026-05", "2026-06", "2026-07", "2026-08",
    "2026-09", "2026-10", "2026-11", "2026-12",
];

/// Units sold per month, by region.
const REGIONS: [(&str, [u32; 12]); 4] = [
    (
        "north",
        [120, 132, 141, 150, 162, 171, 180, 176, 168, 190, 204, 231],
    ),
    (
        "south",
        [90, 88, 97, 110, 126, 140, 151, 149, 137, 128, 122, 135],
    ),
    (
        "east",
        [60, 72, 70, 81, 85, 94, 99, 104, 111, 118, 121, 130],
    ),
    (
        "west",
        [150, 141, 139, 145, 150, 149, 158, 163, 160, 171, 169, 182],
    ),
];

fn region_schema() -> Value {
    json!({
        "type": "string",
        "enum": ["all", "north", "south", "east", "west"],
        "default": "all",
        "description": "A region, or all of them together",
    })
}

fn series(region: &str) -> Result<[u32; 12], ToolError> {
    if region == "all" {
        let mut sum = [0; 12];
        for (_, units) in REGIONS {
            for (s, u) in sum.iter_mut().zip(units) {
                *s += u;
            }
        }
        return Ok(sum);
    }
    REGIONS
        .iter()
        .find(|(name, _)| *name == region)
        .map(|(_, units)| *units)
        .ok_or_else(|| {
            ToolError::new(format!(
                "unknown region {region:?}: use all, north, south, east or west"
            ))
        })
}

#[derive(Deserialize)]
struct ChartArgs {
    #[serde(default = "all")]
    region: String,
}

#[derive(Deserialize)]
struct ForecastArgs {
    #[serde(default = "all")]
    region: String,
    #[serde(default = "three")]
    months: u32,
}

fn all() -> String {
    "all".into()
}

fn three() -> u32 {
    3
}

fn chart(args: ChartArgs) -> Result<CallResult, ToolError> {
    let units = series(&args.region)?;
    let total: u32 = units.iter().sum();
    let (best, most) = MONTHS
        .iter()
        .zip(units)
        .max_by_key(|(_, u)| *u)
        .expect("twelve months");
    let months: Vec<Value> = MONTHS
        .iter()
        .zip(units)
        .map(|(m, u)| json!({ "month": m, "units": u }))
        .collect();
    let text = format!(
        "Sales in 2026 ({}): {total} units; best month {best} with {most} units.",
        args.region
    );
    Ok(CallResult::text(text).with_structured(json!({
        "region": args.region,
        "months": months,
        "total": total,
    })))
}

/// The next `months` months on the straight line through the last six.
fn forecast(args: ForecastArgs) -> Result<CallResult, ToolError> {
    if !(1..=6).contains(&args.months) {
        return Err(ToolError::new("months must be between 1 and 6"));
    }
    let units = series(&args.region)?;
    let last = &units[6..];
    let slope = (last[5] as f64 - last[0] as f64) / 5.0;
    let forecast: Vec<Value> = (1..=args.months)
        .map(|k| {
            let projected = (last[5] as f64 + slope * k as f64).max(0.0).round() as u32;
            json!({ "month": format!("2027-{k:02}"), "units": projected })
        })
        .collect();
    let text = format!(
        "Forecast for {} ({} months): {}",
        args.region,
        args.months,
        forecast
            .iter()
            .map(|m| format!("{} {}", m["month"].as_str().unwrap_or(""), m["units"]))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(CallResult::text(text).with_structured(json!({
        "region": args.region,
        "forecast": forecast,
    })))
}

struct SalesChart;

impl Tool for SalesChart {
    fn list_tools() -> Vec<ToolDefinition> {
        vec![
            ToolDefinition::new(
                "sales.chart",
                "Monthly unit sales of 2026 by region, charted in an interactive view",
                json!({
                    "type": "object",
                    "properties": { "region": region_schema() },
                    "additionalProperties": false,
                }),
            )
            .title("Sales chart")
            .read_only(),
            ToolDefinition::new(
                "sales.forecast",
                "Projects a region's unit sales for the next months (called by the chart's view)",
                json!({
                    "type": "object",
                    "properties": {
                        "region": region_schema(),
                        "months": { "type": "integer", "minimum": 1, "maximum": 6, "default": 3 },
                    },
                    "additionalProperties": false,
                }),
            )
            .title("Sales forecast")
            .read_only(),
        ]
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        match name.as_str() {
            "sales.chart" => chart(parse_args(&arguments)?),
            "sales.forecast" => forecast(parse_args(&arguments)?),
            _ => Err(ToolError::new(format!("unknown tool {name}"))),
        }
    }
}

impl Resources for SalesChart {
    fn list_resources() -> Vec<ResourceDefinition> {
        vec![
            ResourceDefinition::new(VIEW_URI, "sales-chart-view")
                .description("The sales chart's interactive view (an MCP App)")
                .mime_type(APP_MIME_TYPE),
        ]
    }

    fn read(_cx: CallContext, uri: String) -> Result<Vec<ResourceItem>, ResourceError> {
        if uri == VIEW_URI {
            Ok(vec![ResourceItem::text(VIEW_URI, APP_MIME_TYPE, VIEW)])
        } else {
            Err(ResourceError::NotFound(uri))
        }
    }
}

impl Meta for SalesChart {
    fn tool_meta() -> Vec<(String, Value)> {
        vec![
            (
                "sales.chart".into(),
                app_tool_meta(VIEW_URI, &["model", "app"]),
            ),
            ("sales.forecast".into(), app_tool_meta(VIEW_URI, &["app"])),
        ]
    }

    fn resource_meta() -> Vec<(String, Value)> {
        // Self-contained: no origin to fetch from or load anything from.
        vec![(VIEW_URI.into(), app_view_meta(&[], &[], true))]
    }
}

impl Prompts for SalesChart {}
impl Completion for SalesChart {}

hangar_sdk::export_app!(SalesChart);
