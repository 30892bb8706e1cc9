//! PostgreSQL `numeric` in its binary wire format, to and from decimal text.
//!
//! Written here because the kept decimal crates cap precision (rust_decimal
//! at 28 digits) and DB tools must pass numerics through without loss.
//! Wire format: ndigits i16, weight i16, sign u16, dscale u16, then
//! `ndigits` base-10000 digits (i16), most significant first; the value is
//! Σ digit[i] · 10000^(weight − i).

use bytes::{BufMut, BytesMut};

const POSITIVE: u16 = 0x0000;
const NEGATIVE: u16 = 0x4000;
const NAN: u16 = 0xC000;
const PINF: u16 = 0xD000;
const NINF: u16 = 0xF000;

/// Decodes a binary `numeric` into its decimal text, exactly.
pub fn decode(raw: &[u8]) -> Result<String, String> {
    let word = |i: usize| -> Result<u16, String> {
        raw.get(i * 2..i * 2 + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "truncated numeric".to_string())
    };
    let ndigits = word(0)? as usize;
    let weight = word(1)? as i16 as i32;
    let sign = word(2)?;
    let dscale = word(3)? as usize;
    match sign {
        NAN => return Ok("NaN".into()),
        PINF => return Ok("Infinity".into()),
        NINF => return Ok("-Infinity".into()),
        POSITIVE | NEGATIVE => {}
        other => return Err(format!("bad numeric sign {other:#x}")),
    }
    let digits: Vec<u16> = (0..ndigits)
        .map(|i| word(4 + i))
        .collect::<Result<_, _>>()?;
    let digit_at = |exp: i32| -> u16 {
        let i = weight - exp;
        if i >= 0 && (i as usize) < digits.len() {
            digits[i as usize]
        } else {
            0
        }
    };
    let mut out = String::new();
    if sign == NEGATIVE {
        out.push('-');
    }
    if weight < 0 {
        out.push('0');
    } else {
        out.push_str(&digit_at(weight).to_string());
        for exp in (0..weight).rev() {
            out.push_str(&format!("{:04}", digit_at(exp)));
        }
    }
    if dscale > 0 {
        let mut frac = String::new();
        let mut exp = -1;
        while frac.len() < dscale {
            frac.push_str(&format!("{:04}", digit_at(exp)));
            exp -= 1;
        }
        frac.truncate(dscale);
        out.push('.');
        out.push_str(&frac);
    }
    Ok(out)
}

/// Encodes decimal text (`-12.340`, `5`, `1e3` is not accepted) as a binary `numeric`.
pub fn encode(text: &str, out: &mut BytesMut) -> Result<(), String> {
    let text = text.trim();
    let special = match text {
        "NaN" => Some(NAN),
        "Infinity" | "+Infinity" => Some(PINF),
        "-Infinity" => Some(NINF),
        _ => None,
    };
    if let Some(sign) = special {
        for w in [0u16, 0, sign, 0] {
            out.put_u16(w);
        }
        return Ok(());
    }
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(format!("not a decimal number: {text:?}"));
    }
    let dscale = frac.len();
    let int = int.trim_start_matches('0');
    // Pad both parts to whole base-10000 groups.
    let int_pad = (4 - int.len() % 4) % 4;
    let frac_pad = (4 - frac.len() % 4) % 4;
    let padded = format!("{}{int}{frac}{}", "0".repeat(int_pad), "0".repeat(frac_pad));
    let mut groups: Vec<u16> = padded
        .as_bytes()
        .chunks(4)
        .map(|c| std::str::from_utf8(c).unwrap().parse().unwrap())
        .collect();
    let mut weight = ((int.len() + int_pad) / 4) as i32 - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    let sign = if negative && !groups.is_empty() {
        NEGATIVE
    } else {
        POSITIVE
    };
    out.put_u16(groups.len() as u16);
    out.put_i16(weight as i16);
    out.put_u16(sign);
    out.put_u16(dscale as u16);
    for g in groups {
        out.put_u16(g);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> String {
        let mut buf = BytesMut::new();
        encode(text, &mut buf).unwrap();
        decode(&buf).unwrap()
    }

    #[test]
    fn round_trips_exactly() {
        for t in [
            "0",
            "1",
            "-1",
            "10000",
            "12345.678",
            "-0.001",
            "0.0001",
            "100000000.00000001",
            "3.14159265358979323846264338327950288419716939937510",
            "123456789012345678901234567890123456789",
            "NaN",
            "Infinity",
            "-Infinity",
            "5.000",
        ] {
            assert_eq!(round_trip(t), t);
        }
        assert_eq!(round_trip("007.50"), "7.50");
        assert_eq!(round_trip("-0"), "0");
    }

    #[test]
    fn decodes_what_postgres_sends() {
        // SELECT 12345.678::numeric → ndigits 3, weight 1, +, dscale 3: [1, 2345, 6780]
        let raw = [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c];
        assert_eq!(decode(&raw).unwrap(), "12345.678");
    }

    #[test]
    fn rejects_what_is_not_a_decimal() {
        for bad in ["", "1e3", "abc", "1.2.3", "--1", "."] {
            assert!(encode(bad, &mut BytesMut::new()).is_err(), "{bad}");
        }
    }
}
