//! `units`: unit conversions as a plain WIT component (no hangar-sdk): any
//! toolchain that builds a component from `wit/units.wit` serves the same
//! tools (`units.to-celsius`, `units.to-fahrenheit`, `units.to-kilometres`).

wit_bindgen::generate!({
    world: "units",
    path: "wit",
});

#[cfg(target_os = "unknown")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

struct Units;

impl Guest for Units {
    fn to_celsius(fahrenheit: f64) -> f64 {
        (fahrenheit - 32.0) * 5.0 / 9.0
    }

    fn to_fahrenheit(celsius: f64) -> f64 {
        celsius * 9.0 / 5.0 + 32.0
    }

    fn to_kilometres(miles: f64) -> f64 {
        miles * 1.609_344
    }
}

export!(Units);
