//! RFC 3339 timestamps (the JSON form of `google.protobuf.Timestamp`) to and
//! from `SystemTime`, without a date-time dependency.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Formats `t` as `2026-12-01T15:26:13.414438Z` (UTC; fraction only when
/// non-zero, as protojson writes it).
pub(crate) fn format(t: SystemTime) -> String {
    let (secs, nanos) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let mut s = -(d.as_secs() as i64);
            let mut n = d.subsec_nanos();
            if n > 0 {
                s -= 1;
                n = 1_000_000_000 - n;
            }
            (s, n)
        }
    };
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let mut out = format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", y, m, d, rem / 3600, rem / 60 % 60, rem % 60);
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// Parses an RFC 3339 timestamp (`Z` or a numeric offset, any fraction).
pub(crate) fn parse(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !(b[10] == b'T' || b[10] == b't' || b[10] == b' ') || b[13] != b':' || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse::<i64>().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &s[start..i];
        if digits.is_empty() {
            return None;
        }
        let mut padded = String::from(&digits[..digits.len().min(9)]);
        while padded.len() < 9 {
            padded.push('0');
        }
        nanos = padded.parse().ok()?;
    }
    let offset: i64 = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        b'+' | b'-' if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let o = oh * 3600 + om * 60;
            if b[i] == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se - offset;
    if secs >= 0 {
        Some(UNIX_EPOCH + Duration::new(secs as u64, nanos))
    } else {
        Some(UNIX_EPOCH - Duration::from_secs((-secs) as u64) + Duration::from_nanos(u64::from(nanos)))
    }
}

// Howard Hinnant's algorithms for the proleptic Gregorian calendar.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in ["1970-01-01T00:00:00Z", "2026-12-01T15:26:13.414438Z", "2000-02-29T23:59:59.000000001Z", "1969-12-31T23:59:59.5Z"] {
            let t = parse(s).unwrap_or_else(|| panic!("parse {s}"));
            assert_eq!(format(t), s);
        }
    }

    #[test]
    fn offsets_and_bad_input() {
        assert_eq!(parse("2026-12-01T16:26:13+01:00"), parse("2026-12-01T15:26:13Z"));
        assert_eq!(parse("tomorrow"), None);
        assert_eq!(parse("2026-13-01T00:00:00Z"), None);
        assert_eq!(parse("2026-12-01T00:00:00"), None);
    }
}
