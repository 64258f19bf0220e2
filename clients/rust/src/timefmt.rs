//! RFC 3339 timestamps for messages, without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

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

// Howard Hinnant's algorithm for the proleptic Gregorian calendar.
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
    use std::time::Duration;

    #[test]
    fn formats() {
        for (secs, nanos, want) in [
            (0, 0, "1970-01-01T00:00:00Z"),
            (1_796_138_773, 414_438_000, "2026-12-01T15:26:13.414438Z"),
            (951_868_799, 1, "2000-02-29T23:59:59.000000001Z"),
        ] {
            assert_eq!(format(UNIX_EPOCH + Duration::new(secs, nanos)), want);
        }
        assert_eq!(format(UNIX_EPOCH - Duration::from_millis(500)), "1969-12-31T23:59:59.5Z");
    }
}
