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

/// Digits before the decimal point PostgreSQL's `numeric` holds.
pub const MAX_INT_DIGITS: usize = 131_072;
/// Digits after the decimal point (its `dscale`).
pub const MAX_SCALE: usize = 0x3FFF;
/// Base-10000 digits `numeric_recv` accepts in one binary value
/// (`NUMERIC_MAX_PRECISION + NUMERIC_MAX_RESULT_SCALE`).
pub const MAX_GROUPS: usize = 3000;
/// The longest text worth reading: every digit PostgreSQL can hold, a
/// sign, a point and an exponent.
const MAX_TEXT: usize = MAX_INT_DIGITS + MAX_SCALE + 16;

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
    if dscale > MAX_SCALE {
        return Err(format!("bad numeric scale {dscale}"));
    }
    let digits: Vec<u16> = (0..ndigits)
        .map(|i| word(4 + i))
        .collect::<Result<_, _>>()?;
    if let Some(bad) = digits.iter().find(|&&d| d >= 10_000) {
        return Err(format!("bad numeric digit {bad}"));
    }
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
        let mut frac = String::with_capacity(dscale + 4);
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

/// Encodes decimal text (`-12.340`, `5`, `1.5e3`, `NaN`, `Infinity`) as a
/// binary `numeric`. Text PostgreSQL could not hold — more than
/// [`MAX_INT_DIGITS`] digits before the point, more than [`MAX_SCALE`]
/// after it, more than [`MAX_GROUPS`] base-10000 digits — is refused, and
/// the work done is linear in the text's length.
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
    if text.len() > MAX_TEXT {
        return Err(format!(
            "a numeric of {} characters is longer than PostgreSQL holds \
             ({MAX_INT_DIGITS} digits before the point, {MAX_SCALE} after)",
            text.len()
        ));
    }
    let not_decimal = || format!("not a decimal number: {:?}", shorten(text));
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => {
            let exp = &unsigned[at + 1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || digits.len() > 9 || !all_digits(digits) {
                return Err(not_decimal());
            }
            (
                &unsigned[..at],
                exp.parse::<i64>().map_err(|_| not_decimal())?,
            )
        }
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(not_decimal());
    }
    // The digits as written, and where the point falls among them.
    let digits: Vec<u8> = int.bytes().chain(frac.bytes()).map(|b| b - b'0').collect();
    let point = int.len() as i64 + exponent;
    let dscale = (digits.len() as i64 - point).max(0);
    if dscale > MAX_SCALE as i64 {
        return Err(format!(
            "{dscale} digits after the decimal point: PostgreSQL's numeric holds at most {MAX_SCALE}"
        ));
    }
    let Some(first) = digits.iter().position(|&d| d != 0) else {
        // Zero, at its scale.
        for w in [0u16, 0, POSITIVE, dscale as u16] {
            out.put_u16(w);
        }
        return Ok(());
    };
    let last = digits
        .iter()
        .rposition(|&d| d != 0)
        .expect("one is not zero");
    let significant = &digits[first..=last];
    // Decimal exponent of the first significant digit: its value is
    // digit · 10^top.
    let top = point - 1 - first as i64;
    if top + 1 > MAX_INT_DIGITS as i64 {
        return Err(format!(
            "{} digits before the decimal point: PostgreSQL's numeric holds at most {MAX_INT_DIGITS}",
            top + 1
        ));
    }
    let bottom = top - (significant.len() as i64 - 1);
    // Base-10000 digits, most significant first: decimal exponent p lands
    // in group p / 4 (rounded down) at place p mod 4.
    let weight = top.div_euclid(4);
    let groups_len = (weight - bottom.div_euclid(4) + 1) as usize;
    if groups_len > MAX_GROUPS {
        return Err(format!(
            "{} significant digits span {groups_len} base-10000 digits: PostgreSQL \
             accepts at most {MAX_GROUPS} (about {} decimal digits) in a bound numeric",
            significant.len(),
            MAX_GROUPS * 4
        ));
    }
    let mut groups = vec![0u16; groups_len];
    for (i, &d) in significant.iter().enumerate() {
        let p = top - i as i64;
        let slot = (weight - p.div_euclid(4)) as usize;
        groups[slot] += u16::from(d) * 10u16.pow(p.rem_euclid(4) as u32);
    }
    // The first and last groups hold a significant digit, so neither is 0.
    out.put_u16(groups.len() as u16);
    out.put_i16(weight as i16);
    out.put_u16(if negative { NEGATIVE } else { POSITIVE });
    out.put_u16(dscale as u16);
    for g in groups {
        out.put_u16(g);
    }
    Ok(())
}

fn all_digits(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit())
}

/// At most 40 characters of `text`, for messages.
fn shorten(text: &str) -> String {
    let mut short: String = text.chars().take(40).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(text: &str) -> String {
        let mut buf = BytesMut::new();
        encode(text, &mut buf).unwrap();
        decode(&buf).unwrap()
    }

    fn header(text: &str) -> (u16, i16, u16, u16) {
        let mut buf = BytesMut::new();
        encode(text, &mut buf).unwrap();
        let w = |i: usize| u16::from_be_bytes([buf[i * 2], buf[i * 2 + 1]]);
        (w(0), w(1) as i16, w(2), w(3))
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
        assert_eq!(round_trip("-0.000"), "0.000");
        assert_eq!(round_trip(".5"), "0.5");
    }

    #[test]
    fn exponents_shift_the_point_as_postgres_does() {
        assert_eq!(round_trip("1e3"), "1000");
        assert_eq!(round_trip("1.50e1"), "15.0");
        assert_eq!(round_trip("-2.5E-3"), "-0.0025");
        assert_eq!(round_trip("12e+0"), "12");
        // serde_json writes large and small floats this way.
        assert_eq!(round_trip("1e20"), "100000000000000000000");
        assert_eq!(round_trip("1.5e-7"), "0.00000015");
    }

    #[test]
    fn decodes_what_postgres_sends() {
        // SELECT 12345.678::numeric → ndigits 3, weight 1, +, dscale 3: [1, 2345, 6780]
        let raw = [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c];
        assert_eq!(decode(&raw).unwrap(), "12345.678");
        assert_eq!(header("12345.678"), (3, 1, POSITIVE, 3));
    }

    #[test]
    fn rejects_what_is_not_a_decimal() {
        for bad in [
            "",
            "abc",
            "1.2.3",
            "--1",
            ".",
            "e5",
            "1e",
            "1e+",
            "1ee3",
            "1e3.5",
            "1e1234567890",
            "0x10",
            "1_000",
            "١٢",
        ] {
            let e = encode(bad, &mut BytesMut::new()).unwrap_err();
            assert!(e.starts_with("not a decimal number"), "{bad}: {e}");
        }
    }

    #[test]
    fn limits_are_postgres_limits() {
        // The most digits before the point: one, then zeros.
        let big = format!("1{}", "0".repeat(MAX_INT_DIGITS - 1));
        assert_eq!(
            header(&big),
            (1, (MAX_INT_DIGITS / 4 - 1) as i16, POSITIVE, 0)
        );
        let e = encode(&format!("{big}0"), &mut BytesMut::new()).unwrap_err();
        assert!(e.contains("131073 digits before the decimal point"), "{e}");
        // The smallest step: 0.000…1 at the largest scale.
        let tiny = format!("0.{}1", "0".repeat(MAX_SCALE - 1));
        assert_eq!(
            header(&tiny),
            (1, -((MAX_SCALE / 4) as i16) - 1, POSITIVE, MAX_SCALE as u16)
        );
        assert_eq!(round_trip(&tiny), tiny);
        let e = encode(
            &format!("0.0{}1", "0".repeat(MAX_SCALE - 1)),
            &mut BytesMut::new(),
        )
        .unwrap_err();
        assert!(e.contains("16384 digits after the decimal point"), "{e}");
        // A 131 KB 0.000…1 is refused quickly, not bound as a huge number.
        let e = encode(&format!("0.{}1", "0".repeat(131_070)), &mut BytesMut::new()).unwrap_err();
        assert!(e.contains("after the decimal point"), "{e}");
        let e = encode(&"9".repeat(MAX_TEXT + 1), &mut BytesMut::new()).unwrap_err();
        assert!(e.contains("longer than PostgreSQL holds"), "{e}");
        // Dense digits: at most 3000 base-10000 groups.
        assert!(encode(&"7".repeat(MAX_GROUPS * 4), &mut BytesMut::new()).is_ok());
        let e = encode(&"7".repeat(MAX_GROUPS * 4 + 1), &mut BytesMut::new()).unwrap_err();
        assert!(e.contains("significant digits"), "{e}");
        // Fewer digits, but across 3001 groups of four: 5.1111… to 11998 places.
        let e = encode(&format!("5.{}", "1".repeat(11_998)), &mut BytesMut::new()).unwrap_err();
        assert!(
            e.contains("11999 significant digits span 3001 base-10000 digits"),
            "{e}"
        );
        assert!(encode("1e-16384", &mut BytesMut::new()).is_err());
        assert!(encode("1e131072", &mut BytesMut::new()).is_err());
        assert!(encode("1e131071", &mut BytesMut::new()).is_ok());
    }

    #[test]
    fn decode_refuses_what_postgres_never_sends() {
        // Digit 10000, scale past the limit, a short buffer.
        assert!(decode(&[0, 1, 0, 0, 0, 0, 0, 0, 0x27, 0x10]).is_err());
        assert!(decode(&[0, 0, 0, 0, 0, 0, 0x40, 0]).is_err());
        assert!(decode(&[0, 2, 0, 0, 0, 0, 0, 0, 0, 1]).is_err());
    }

    /// The text `decode` gives for a plain decimal: no leading zeros, the
    /// fraction as written, no sign on zero.
    fn canonical(negative: bool, int: &str, frac: &str) -> String {
        let int = int.trim_start_matches('0');
        let zero = int.is_empty() && frac.bytes().all(|b| b == b'0');
        let mut out = String::new();
        if negative && !zero {
            out.push('-');
        }
        out.push_str(if int.is_empty() { "0" } else { int });
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        out
    }

    proptest! {
        #[test]
        fn plain_decimals_round_trip(
            negative in any::<bool>(),
            int in "[0-9]{0,70}",
            frac in "[0-9]{0,70}",
        ) {
            prop_assume!(!(int.is_empty() && frac.is_empty()));
            let text = format!(
                "{}{int}{}{frac}",
                if negative { "-" } else { "" },
                if frac.is_empty() { "" } else { "." }
            );
            prop_assert_eq!(round_trip(&text), canonical(negative, &int, &frac));
        }

        #[test]
        fn an_exponent_equals_moving_the_point(
            digits in "[1-9][0-9]{0,30}",
            exp in -40i64..40,
        ) {
            // digits·10^exp written out by hand.
            let plain = if exp >= 0 {
                format!("{digits}{}", "0".repeat(exp as usize))
            } else {
                let shift = (-exp) as usize;
                let padded = format!("{}{digits}", "0".repeat(shift));
                let (i, f) = padded.split_at(padded.len() - shift);
                format!("{i}.{f}")
            };
            prop_assert_eq!(round_trip(&format!("{digits}e{exp}")), round_trip(&plain));
        }

        #[test]
        fn encode_never_panics_and_fits_the_wire(text in "[-+0-9.eE ]{0,64}|\\PC{0,64}") {
            let mut buf = BytesMut::new();
            if encode(&text, &mut buf).is_ok() {
                let decoded = decode(&buf);
                prop_assert!(decoded.is_ok(), "{text:?} encoded to something undecodable");
            }
        }

        #[test]
        fn decode_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&raw);
        }
    }
}
