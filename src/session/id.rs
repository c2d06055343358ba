//! The one maker of new session ids, for every front end.

use std::sync::atomic::{AtomicU64, Ordering};

/// A new session id: `YYYYMMDD-HHMMSS-mmm-PID-N` (UTC to the millisecond, this process, a
/// counter). Ids sort by creation time, and no two processes or calls sharing a sessions root
/// pick the same one.
pub fn new_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let (y, m, d, hh, mm, ss) = civil(ms);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        "{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}-{:03}-{}-{n}",
        ms % 1000,
        std::process::id()
    )
}

/// `ms` since the Unix epoch as a UTC civil time: (year, month, day, hour, minute, second).
pub fn civil(ms: u128) -> (i64, i64, i64, i64, i64, i64) {
    let secs = i64::try_from(ms / 1000).unwrap_or(i64::MAX);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A time as ISO 8601 in UTC, to the millisecond (`2026-12-02T15:51:16.123Z`).
pub fn iso8601(time: std::time::SystemTime) -> String {
    let ms = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let (y, m, d, hh, mm, ss) = civil(ms);
    format!(
        "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:03}Z",
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_time_are_unique_and_valid() {
        let (a, b) = (new_id(), new_id());
        assert_ne!(a, b);
        assert!(a.starts_with("20"), "{a}");
        assert_eq!(a.split('-').count(), 5, "{a}");
        assert!(a.chars().all(|c| c.is_ascii_digit() || c == '-'), "{a}");
        cordis_session::check_id(&a).unwrap();
    }

    #[test]
    fn civil_time_of_known_instants() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        // 2026-12-02T15:51:16Z
        assert_eq!(civil(1_796_226_676_000), (2026, 12, 2, 15, 51, 16));
    }
}
