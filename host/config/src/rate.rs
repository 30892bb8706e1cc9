//! `rate_limit = "N/s"` (or `"N/m"`): how many calls one caller may make.

use std::borrow::Cow;
use std::fmt;
use std::num::NonZeroU32;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

/// A number of calls per second or per minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub calls: NonZeroU32,
    pub per_minute: bool,
}

impl std::str::FromStr for RateLimit {
    type Err = String;

    fn from_str(s: &str) -> Result<RateLimit, String> {
        let bad = || format!("rate_limit {s:?}: expected \"N/s\" or \"N/m\" with N > 0");
        let (n, unit) = s.trim().split_once('/').ok_or_else(bad)?;
        let calls: u32 = n.trim().parse().map_err(|_| bad())?;
        let per_minute = match unit.trim() {
            "s" | "sec" | "second" => false,
            "m" | "min" | "minute" => true,
            _ => return Err(bad()),
        };
        Ok(RateLimit {
            calls: NonZeroU32::new(calls).ok_or_else(bad)?,
            per_minute,
        })
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            self.calls,
            if self.per_minute { "m" } else { "s" }
        )
    }
}

impl JsonSchema for RateLimit {
    fn schema_name() -> Cow<'static, str> {
        "RateLimit".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": r"^\s*\+?[0-9]+\s*/\s*(s|sec|second|m|min|minute)\s*$",
            "description": "Calls per second (\"N/s\") or per minute (\"N/m\"), N > 0."
        })
    }
}

impl<'de> Deserialize<'de> for RateLimit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RateLimit, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_per_second_and_per_minute() {
        let r: RateLimit = "5/s".parse().unwrap();
        assert_eq!((r.calls.get(), r.per_minute), (5, false));
        assert!("120 / m".parse::<RateLimit>().unwrap().per_minute);
        for bad in ["0/s", "5", "5/h", "x/s", "-1/s"] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad}");
        }
    }
}
