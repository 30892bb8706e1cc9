//! Host time of one `search_tools` query over 500 tools (no HTTP), for
//! scripts/bench. Prints `search_tools_us_per_query <µs>`.

use std::hint::black_box;
use std::time::Instant;

use hangar::catalog::search::ToolSearch;

const DOMAINS: &[(&str, &[&str])] = &[
    (
        "billing",
        &["invoice", "payment", "refund", "subscription", "coupon"],
    ),
    ("crm", &["contact", "company", "deal", "lead", "note"]),
    (
        "inventory",
        &[
            "product",
            "warehouse",
            "stock level",
            "supplier",
            "purchase order",
        ],
    ),
    (
        "shipping",
        &["shipment", "carrier", "label", "return", "pickup"],
    ),
    (
        "support",
        &[
            "ticket",
            "agent",
            "macro",
            "satisfaction survey",
            "knowledge article",
        ],
    ),
    (
        "hr",
        &["employee", "payroll", "vacation", "review", "candidate"],
    ),
    (
        "marketing",
        &["campaign", "email", "segment", "landing page", "ab test"],
    ),
    (
        "analytics",
        &["dashboard", "report", "metric", "funnel", "cohort"],
    ),
    (
        "identity",
        &["user", "role", "session", "api token", "group"],
    ),
    ("storage", &["file", "bucket", "folder", "backup", "quota"]),
];
const ACTIONS: &[(&str, &str)] = &[
    ("list", "List all {}s"),
    ("get", "Fetch one {} by its id"),
    ("create", "Create a new {}"),
    ("update", "Update the fields of an existing {}"),
    ("delete", "Delete a {} permanently"),
    ("search", "Search {}s by a text query"),
    ("export", "Export {}s to a CSV file"),
    ("archive", "Archive an old {}"),
    ("restore", "Restore an archived {}"),
    ("count", "Count how many {}s there are"),
];
const QUERIES: &[&str] = &[
    "list all invoices",
    "create a refund",
    "delete an employee record",
    "search support tickets",
    "export contacts to csv",
    "how many shipments are there",
    "restore an archived campaign",
    "fetch a user by id",
    "list invocies",
    "delte a warehouse",
    "creating new subscriptions",
    "serch leads",
    "csv export of reports",
    "fetch one purchase order",
];

fn main() {
    let tools: Vec<(String, String)> = DOMAINS
        .iter()
        .flat_map(|(domain, entities)| {
            entities.iter().flat_map(move |e| {
                ACTIONS.iter().map(move |(action, text)| {
                    (
                        format!("{domain}.{}s.{action}", e.replace(' ', "_")),
                        text.replace("{}", e),
                    )
                })
            })
        })
        .collect();
    assert_eq!(tools.len(), 500);
    let index = ToolSearch::new(tools.iter().map(|(n, d)| (n.as_str(), None, d.as_str())));
    for q in QUERIES {
        black_box(index.search(q));
    }
    let rounds = 200;
    let start = Instant::now();
    for _ in 0..rounds {
        for q in QUERIES {
            black_box(index.search(black_box(q)));
        }
    }
    let per_query = start.elapsed().as_secs_f64() * 1e6 / (rounds * QUERIES.len()) as f64;
    println!("search_tools_us_per_query {per_query:.1}");
}
