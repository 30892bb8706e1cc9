//! `typed-kitchen`: a plain WIT component (no hangar-sdk, no `hangar:plugin`
//! world) for the typed-export tests: its own package `test:kitchen`, built
//! with plain `wit-bindgen`. The interface `types` echoes every WIT type
//! back; the world's own functions cover results (ok and err), a function
//! with no return value, a loop that only the host's limits stop, and an
//! outbound HTTP GET (`fetch`, with `wstd`) that only a grant lets through.
//! `types.counter-value` takes a resource, so the host can not serve it, and
//! `wasi:cli/run` is exported only to be skipped. The interface `bulk` makes
//! and counts byte lists and string lists of any size, for the host's memory
//! bounds on plain components' values.

wit_bindgen::generate!({
    world: "kitchen",
    path: "wit",
});

use exports::test::kitchen::types::{
    self, Color, Counter, ErrorInfo, GuestCounter, Perms, Point, Settings, Shape,
};
use std::sync::atomic::{AtomicU32, Ordering};
use wstd::http::{Body, Client, Request};

struct Kitchen;

/// The resource behind `counter`; nothing can hand one in through Hangar.
struct KitchenCounter;

impl GuestCounter for KitchenCounter {}

impl types::Guest for Kitchen {
    type Counter = KitchenCounter;

    fn echo_bool(v: bool) -> bool {
        v
    }
    fn echo_u8(v: u8) -> u8 {
        v
    }
    fn echo_u16(v: u16) -> u16 {
        v
    }
    fn echo_u32(v: u32) -> u32 {
        v
    }
    fn echo_u64(v: u64) -> u64 {
        v
    }
    fn echo_s8(v: i8) -> i8 {
        v
    }
    fn echo_s16(v: i16) -> i16 {
        v
    }
    fn echo_s32(v: i32) -> i32 {
        v
    }
    fn echo_s64(v: i64) -> i64 {
        v
    }
    fn echo_f32(v: f32) -> f32 {
        v
    }
    fn echo_f64(v: f64) -> f64 {
        v
    }
    fn echo_char(v: char) -> char {
        v
    }
    fn echo_string(v: String) -> String {
        v
    }
    fn echo_list(v: Vec<String>) -> Vec<String> {
        v
    }
    fn echo_bytes(v: Vec<u8>) -> Vec<u8> {
        v
    }
    fn echo_option(v: Option<u32>) -> Option<u32> {
        v
    }
    fn echo_tuple(v: (String, u32)) -> (String, u32) {
        v
    }
    fn echo_point(p: Point) -> Point {
        p
    }
    fn echo_points(v: Vec<Point>) -> Vec<Point> {
        v
    }
    fn echo_shape(v: Shape) -> Shape {
        v
    }
    fn echo_color(v: Color) -> Color {
        v
    }
    fn echo_perms(v: Perms) -> Perms {
        v
    }
    fn echo_nested(v: Vec<Result<u32, String>>) -> Vec<Result<u32, String>> {
        v
    }
    fn echo_unit_results(v: Vec<Result<(), Color>>) -> Vec<Result<(), Color>> {
        v
    }
    fn echo_option_option(v: Option<Vec<u8>>) -> Option<Vec<u8>> {
        v
    }
    fn echo_settings(s: Settings) -> Settings {
        s
    }
    fn make_point(x: i32, y: i32) -> Point {
        Point { x, y, label: None }
    }
    fn lookup(key: String) -> Result<Point, ErrorInfo> {
        match key.as_str() {
            "origin" => Ok(Point {
                x: 0,
                y: 0,
                label: Some("origin".into()),
            }),
            "unit" => Ok(Point {
                x: 1,
                y: 1,
                label: None,
            }),
            _ => Err(ErrorInfo {
                code: 404,
                message: format!("no point {key}"),
            }),
        }
    }
    fn divide(x: f64, y: f64) -> f64 {
        x / y
    }
    fn counter_value(c: Counter) -> u32 {
        let _ = c.get::<KitchenCounter>();
        0
    }
}

impl exports::test::kitchen::bulk::Guest for Kitchen {
    fn make_bytes(n: u32) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8).collect()
    }
    fn make_strings(n: u32, size: u32) -> Vec<String> {
        let one: String = (0..size).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        vec![one; n as usize]
    }
    fn count_bytes(v: Vec<u8>) -> u64 {
        v.len() as u64
    }
    fn count_strings(v: Vec<String>) -> u64 {
        v.iter().map(|s| s.len() as u64).sum()
    }
    fn make_blob(n: u32) -> Result<Option<exports::test::kitchen::bulk::Blob>, String> {
        Ok(Some(exports::test::kitchen::bulk::Blob {
            name: format!("{n} bytes"),
            data: Self::make_bytes(n),
        }))
    }
    fn make_bools(n: u32) -> Vec<bool> {
        (0..n).map(|i| i % 2 == 0).collect()
    }
}

impl Guest for Kitchen {
    fn add(a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }

    fn describe(name: String, age: Option<u32>) -> String {
        match age {
            Some(age) => format!("{name} is {age}"),
            None => format!("{name}, age unknown"),
        }
    }

    fn checked_div(a: i32, b: i32) -> Result<i32, String> {
        a.checked_div(b)
            .ok_or_else(|| format!("cannot divide {a} by {b}"))
    }

    fn maybe_fail(fail: bool) -> Result<(), String> {
        if fail {
            Err("failed as asked".into())
        } else {
            Ok(())
        }
    }

    fn record_note(note: String) {
        // Nothing to give back: the tool's result has no content.
        let _ = std::hint::black_box(note);
    }

    /// Counts to `n`; `n = 0` never ends (only the host's limits stop it).
    fn spin(n: u64) -> u64 {
        let mut i: u64 = 0;
        while n == 0 || i < n {
            i = std::hint::black_box(i.wrapping_add(1));
        }
        i
    }

    fn hello() -> String {
        "hello".into()
    }

    fn bump() -> u32 {
        static CALLS: AtomicU32 = AtomicU32::new(0);
        CALLS.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn greet(first_name: String, last_name: Option<String>) -> String {
        match last_name {
            Some(last) => format!("Hello, {first_name} {last}!"),
            None => format!("Hello, {first_name}!"),
        }
    }

    fn fetch(url: String) -> Result<String, String> {
        wstd::runtime::block_on(get(&url))
    }
}

/// One GET; the body of a 2xx answer, or the status or error otherwise.
async fn get(url: &str) -> Result<String, String> {
    let request = Request::get(url)
        .body(Body::empty())
        .map_err(|e| format!("bad request: {e}"))?;
    let response = Client::new()
        .send(request)
        .await
        .map_err(|e| format!("request failed: {e:?}"))?;
    let status = response.status();
    let mut body = response.into_body();
    let bytes = body
        .contents()
        .await
        .map_err(|e| format!("reading the body failed: {e:?}"))?;
    if !status.is_success() {
        return Err(format!("status {}", status.as_u16()));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// Exported only so that the component has an export in the `wasi:`
/// namespace, which the host must not serve.
impl exports::wasi::cli::run::Guest for Kitchen {
    fn run() -> Result<(), ()> {
        Ok(())
    }
}

export!(Kitchen);
