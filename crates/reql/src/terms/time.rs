//! Times: `time`, `epoch_time`, `iso8601`, `to_iso8601`, `to_epoch_time`, `in_timezone`,
//! `timezone`, `during`, `date`, `time_of_day`, the portions (`year` … `seconds`) and the
//! day/month constants.
//!
//! A TIME is `{epoch_time, timezone}`; RethinkDB only knows fixed offsets (`+hh:mm`,
//! `-hh:mm`, `Z`, …), and keeps millisecond precision (`epoch_time` is rounded to three
//! decimals whenever a time is built). Calendar fields follow RethinkDB's Boost-based
//! code: the instant is taken to whole microseconds (truncated toward zero), shifted by
//! the offset, and split into a proleptic Gregorian date whose year must lie in
//! `1400..=10000` (Boost's range), with the same error texts.

use datum::{ptype, Datum};
use proto::ql2::TermType as T;

use crate::error::{logic, Result, WithFrame};
use crate::eval::{expect_int, expect_str, Ev};
use crate::value::Val;

const US_PER_SEC: i128 = 1_000_000;
const US_PER_DAY: i128 = 86_400 * US_PER_SEC;

/// RethinkDB's rounding of epoch seconds to milliseconds.
pub fn round_ms(epoch: f64) -> f64 {
    (epoch * 1000.0).round() / 1000.0
}

/// Builds a TIME with RethinkDB's millisecond rounding.
pub fn new_time(epoch: f64, tz: &str) -> Datum {
    ptype::make_time(round_ms(epoch), tz)
}

// ---------------------------------------------------------------------------------------
// Sanitizers (RethinkDB's `pseudo::sanitize`), errors as plain strings.

fn truncated(s: &str) -> String {
    format!(
        "Invalid time zone string `{s}`. Valid time zones are `+hh:mm`, `-hh:mm`, \
         `+hhmm`, `-hhmm`, `+hh`, `-hh` and `Z`."
    )
}

/// A cursor over an ASCII-ish string, copying what it accepts into `out`.
struct Scan<'a> {
    s: &'a str,
    b: &'a [u8],
    at: usize,
    out: String,
}

impl<'a> Scan<'a> {
    fn new(s: &'a str) -> Self {
        Scan {
            s,
            b: s.as_bytes(),
            at: 0,
            out: String::new(),
        }
    }

    fn done(&self) -> bool {
        self.at >= self.b.len()
    }

    /// `mandatory_digits`: `n` digits, copied when `copy`.
    fn digits(&mut self, n: usize, copy: bool) -> Result<(), String> {
        for _ in 0..n {
            let Some(&c) = self.b.get(self.at) else {
                return Err(truncated(self.s));
            };
            if !c.is_ascii_digit() {
                let shown = self.s.get(self.at..).and_then(|r| r.chars().next());
                let shown = shown.map_or_else(|| (c as char).to_string(), |ch| ch.to_string());
                return Err(format!(
                    "Invalid date string `{}` (got `{}` but expected a digit).",
                    self.s, shown
                ));
            }
            self.at += 1;
            if copy {
                self.out.push(c as char);
            }
        }
        Ok(())
    }

    /// `optional_char`: consumes `c` if present; copies `c` when consumed or `include`.
    fn opt(&mut self, c: u8, include: bool) -> bool {
        if self.b.get(self.at) == Some(&c) {
            self.at += 1;
            self.out.push(c as char);
            true
        } else {
            if include {
                self.out.push(c as char);
            }
            false
        }
    }

    fn rest(&self) -> &str {
        self.s.get(self.at..).unwrap_or("")
    }
}

/// RethinkDB's time zone sanitizer: `Z`, `±hh`, `±hhmm`, `±hh:mm` → `±hh:mm`.
pub fn sanitize_tz(s: &str) -> Result<String, String> {
    if s == "-00" || s == "-00:00" {
        return Err(format!("`{s}` is not a valid time offset."));
    }
    if s == "Z" {
        return Ok("+00:00".into());
    }
    let mut sc = Scan::new(s);
    if !(sc.opt(b'-', false) || sc.opt(b'+', false)) {
        return Err(format!("Timezone `{s}` does not start with `-` or `+`."));
    }
    sc.digits(2, true)?;
    if sc.done() {
        sc.out.push_str(":00");
        return Ok(sc.out);
    }
    sc.opt(b':', true);
    sc.digits(2, true)?;
    if !sc.done() {
        return Err(format!(
            "Garbage characters `{}` at end of timezone string `{s}`.",
            sc.rest()
        ));
    }
    let o = sc.out.as_bytes();
    let (h1, h2, m1) = (
        o.get(1).copied().unwrap_or(b'0'),
        o.get(2).copied().unwrap_or(b'0'),
        o.get(4).copied().unwrap_or(b'0'),
    );
    let hours_ok = ((h1 == b'0' || h1 == b'1') && h2.is_ascii_digit())
        || (h1 == b'2' && (b'0'..=b'4').contains(&h2));
    if !hours_ok {
        return Err(format!("Hours out of range in `{s}`."));
    }
    if !(b'0'..=b'5').contains(&m1) {
        return Err(format!("Minutes out of range in `{s}`."));
    }
    Ok(sc.out)
}

/// The offset in seconds east of UTC of a sanitized `±hh:mm` zone.
fn tz_offset(tz: &str) -> i64 {
    let b = tz.as_bytes();
    let num = |i: usize| b.get(i).map_or(0, |c| i64::from(c.wrapping_sub(b'0')));
    let secs = (num(1) * 10 + num(2)) * 3600 + (num(4) * 10 + num(5)) * 60;
    if b.first() == Some(&b'-') {
        -secs
    } else {
        secs
    }
}

/// The shape of a sanitized date.
#[derive(Debug, PartialEq)]
enum DateForm {
    MonthDay,
    Week,
    DayCount,
}

fn sanitize_date(s: &str) -> Result<(String, DateForm), String> {
    let mut sc = Scan::new(s);
    sc.digits(4, true)?;
    if sc.done() {
        sc.out.push_str("-01-01");
        return Ok((sc.out, DateForm::MonthDay));
    }
    let first_hyphen = sc.opt(b'-', true);
    let form;
    if sc.opt(b'W', false) {
        form = DateForm::Week;
        sc.digits(2, true)?;
        if sc.done() {
            sc.out.push_str("-1");
            return Ok((sc.out, form));
        }
        sc.opt(b'-', true);
        sc.digits(1, true)?;
    } else if s.len().saturating_sub(sc.at) == 3 {
        form = DateForm::DayCount;
        sc.digits(3, true)?;
    } else {
        form = DateForm::MonthDay;
        sc.digits(2, true)?;
        if first_hyphen && sc.done() {
            sc.out.push_str("-01");
            return Ok((sc.out, form));
        }
        let second_hyphen = sc.opt(b'-', true);
        if first_hyphen != second_hyphen {
            return Err(format!("Date string `{s}` must have 0 or 2 hyphens."));
        }
        sc.digits(2, true)?;
    }
    if !sc.done() {
        return Err(format!(
            "Garbage characters `{}` at end of date string `{s}`.",
            sc.rest()
        ));
    }
    Ok((sc.out, form))
}

fn sanitize_time(s: &str) -> Result<String, String> {
    let mut sc = Scan::new(s);
    sc.digits(2, true)?;
    if sc.done() {
        sc.out.push_str(":00:00.000");
        return Ok(sc.out);
    }
    let first_colon = sc.opt(b':', true);
    sc.digits(2, true)?;
    if sc.done() {
        sc.out.push_str(":00.000");
        return Ok(sc.out);
    }
    let second_colon = sc.opt(b':', true);
    if first_colon != second_colon {
        return Err(format!("Time string `{s}` must have 0 or 2 colons."));
    }
    sc.digits(2, true)?;
    if sc.opt(b'.', false) {
        let mut read = 0;
        while !sc.done() && read < 3 {
            sc.digits(1, true)?;
            read += 1;
        }
        while !sc.done() {
            sc.digits(1, false)?;
        }
        while read < 3 {
            sc.out.push('0');
            read += 1;
        }
    } else {
        sc.out.push_str(".000");
    }
    if !sc.done() {
        return Err(format!(
            "Garbage characters `{}` at end of time string `{s}`.",
            sc.rest()
        ));
    }
    Ok(sc.out)
}

// ---------------------------------------------------------------------------------------
// Calendar arithmetic (proleptic Gregorian, days since 1970-01-01).

/// Days since 1970-01-01 of a civil date.
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month, day)` of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
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

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn time_logic(msg: &str) -> String {
    format!("Error in time logic: {msg}.")
}

fn check_year(y: i64) -> Result<(), String> {
    if (1400..=10000).contains(&y) {
        Ok(())
    } else {
        Err(time_logic("Year is out of valid range: 1400..10000"))
    }
}

/// Validates a calendar date as Boost's `date` constructor does.
fn checked_days(y: i64, m: i64, d: i64) -> Result<i64, String> {
    if !(1..=31).contains(&d) {
        return Err(time_logic("Day of month value is out of range 1..31"));
    }
    if !(1..=12).contains(&m) {
        return Err(time_logic("Month number is out of range 1..12"));
    }
    check_year(y)?;
    if d > days_in_month(y, m) {
        return Err(time_logic("Day of month is not valid for year"));
    }
    Ok(days_from_civil(y, m, d))
}

/// Whole microseconds of an epoch, as RethinkDB's `add_seconds_to_ptime` computes them.
fn epoch_us(epoch: f64) -> i128 {
    let sec = epoch.trunc() as i64;
    let micro = (epoch * 1_000_000.0 - (sec as f64) * 1_000_000.0) as i64;
    i128::from(sec) * US_PER_SEC + i128::from(micro)
}

/// A time broken into local calendar fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Civil {
    /// Year.
    pub year: i64,
    /// Month 1..=12.
    pub month: i64,
    /// Day of month 1..=31.
    pub day: i64,
    /// Local days since 1970-01-01.
    pub days: i64,
    /// Microseconds since local midnight.
    pub day_us: i64,
}

impl Civil {
    /// Local calendar fields of `epoch` at `offset` seconds east of UTC.
    pub fn of(epoch: f64, offset: i64) -> Result<Civil, String> {
        let local = epoch_us(epoch) + i128::from(offset) * US_PER_SEC;
        let days = local.div_euclid(US_PER_DAY);
        let day_us = local.rem_euclid(US_PER_DAY) as i64;
        // Far outside Boost's range: fail before the calendar arithmetic could overflow.
        let days = i64::try_from(days)
            .ok()
            .filter(|d| d.abs() < 1_000_000_000)
            .ok_or_else(|| time_logic("Year is out of valid range: 1400..10000"))?;
        let (year, month, day) = civil_from_days(days);
        check_year(year)?;
        Ok(Civil {
            year,
            month,
            day,
            days,
            day_us,
        })
    }

    /// ISO weekday, Monday = 1 … Sunday = 7.
    pub fn weekday(&self) -> i64 {
        // 1970-01-01 was a Thursday (4).
        (self.days + 3).rem_euclid(7) + 1
    }

    /// Day of the year, 1-based.
    pub fn day_of_year(&self) -> i64 {
        self.days - days_from_civil(self.year, 1, 1) + 1
    }

    /// Hours, minutes and whole seconds since local midnight.
    pub fn hms(&self) -> (i64, i64, i64) {
        let s = self.day_us / 1_000_000;
        (s / 3600, (s / 60) % 60, s % 60)
    }
}

/// ISO 8601 text of a time at a sanitized zone (RethinkDB's `time_to_iso8601`).
pub fn format_iso8601(epoch: f64, tz: &str) -> Result<String, String> {
    let c = Civil::of(epoch, tz_offset(tz))?;
    if !(0..=9999).contains(&c.year) {
        return Err(format!(
            "Year `{}` out of valid ISO 8601 range [0, 9999].",
            c.year
        ));
    }
    let (h, m, s) = c.hms();
    let frac_us = c.day_us % 1_000_000;
    let frac = if frac_us != 0 {
        format!(".{:03}", frac_us / 1000)
    } else {
        String::new()
    };
    Ok(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{}{}",
        c.year, c.month, c.day, h, m, s, frac, tz
    ))
}

/// Parses an ISO 8601 string as RethinkDB does: returns `(epoch, timezone)`.
pub fn parse_iso8601(s: &str, default_tz: &str) -> Result<(f64, String), String> {
    let tloc = s.find('T');
    let (date_s, form) = sanitize_date(tloc.map_or(s, |t| s.get(..t).unwrap_or("")))?;
    let (time_s, tz_raw) = match tloc {
        None => ("00:00:00.000".to_string(), None),
        Some(t) => {
            let rest = s.get(t + 1..).unwrap_or("");
            let sign = rest
                .find('-')
                .or_else(|| rest.find('+'))
                .or_else(|| rest.find('Z'));
            match sign {
                None => (sanitize_time(rest)?, None),
                Some(p) => {
                    let time = sanitize_time(rest.get(..p).unwrap_or(""))?;
                    let tz = sanitize_tz(rest.get(p..).unwrap_or(""))?;
                    (time, Some(tz))
                }
            }
        }
    };
    if form == DateForm::Week {
        return Err(
            "Due to limitations in the boost time library we use for parsing, we \
                    cannot support ISO week dates right now.  Sorry about that!  Please use \
                    years, calendar dates, or ordinal dates instead."
                .into(),
        );
    }
    let tz = match tz_raw {
        Some(tz) => tz,
        None if default_tz.is_empty() => {
            return Err(
                "ISO 8601 string has no time zone, and no default time zone was provided.".into(),
            )
        }
        None => sanitize_tz(default_tz)
            .map_err(|_| format!("Invalid ISO 8601 timezone: `{default_tz}`."))?,
    };
    // The sanitized forms are fixed-width ASCII: `YYYY-MM-DD` or `YYYY-DDD`, and
    // `HH:MM:SS.fff`.
    let num = |t: &str, a: usize, b: usize| -> i64 {
        t.get(a..b).and_then(|x| x.parse().ok()).unwrap_or(0)
    };
    let year = num(&date_s, 0, 4);
    let days = match form {
        DateForm::DayCount => {
            let doy = num(&date_s, 5, 8);
            check_year(year)?;
            if !(1..=366).contains(&doy) {
                return Err(time_logic("Day of year value is out of range 1..366"));
            }
            days_from_civil(year, 1, 1) + doy - 1
        }
        _ => checked_days(year, num(&date_s, 5, 7), num(&date_s, 8, 10))?,
    };
    let ms = num(&time_s, 0, 2) * 3_600_000
        + num(&time_s, 3, 5) * 60_000
        + num(&time_s, 6, 8) * 1000
        + num(&time_s, 9, 12);
    let total_ms = days * 86_400_000 + ms - tz_offset(&tz) * 1000;
    Ok((total_ms as f64 / 1000.0, tz))
}

// ---------------------------------------------------------------------------------------
// Term helpers.

/// Checks a datum is a TIME (RethinkDB's `as_ptype("TIME")`).
pub fn expect_time(d: &Datum) -> Result<()> {
    if d.reql_type() == Some("TIME") {
        Ok(())
    } else {
        Err(logic(format!(
            "Not a TIME pseudotype: `{}`.",
            crate::eval::trunc_print(d)
        )))
    }
}

/// Argument `i` as a TIME: `(datum, epoch, sanitized zone)`.
fn time_arg(ev: &Ev, i: usize) -> Result<(Datum, f64, String)> {
    let d = ev.datum(i)?;
    let (epoch, tz) = time_parts(&d).at(i)?;
    Ok((d, epoch, tz))
}

fn time_parts(d: &Datum) -> Result<(f64, String)> {
    expect_time(d)?;
    let epoch = ptype::time_epoch(d).ok_or_else(|| {
        logic(format!(
            "Invalid time object constructed (no field `epoch_time`):\n{}",
            crate::eval::trunc_print(d)
        ))
    })?;
    let tz = match ptype::time_zone(d) {
        Some(z) => sanitize_tz(z).map_err(logic)?,
        None => "+00:00".to_string(),
    };
    Ok((epoch, tz))
}

fn num(n: f64) -> Result<Val> {
    Ok(Val::Datum(Datum::Number(n)))
}

/// An `int` argument (RethinkDB's `as_int<int>`).
fn int_arg(ev: &Ev, i: usize) -> Result<i64> {
    let d = ev.datum(i)?;
    let n = expect_int(&d).at(i)?;
    if i32::try_from(n).is_err() {
        return Err(logic(format!("Integer too large: {n}"))).at(i);
    }
    Ok(n)
}

/// The day and month constants (`r.monday` … `r.december`).
pub fn constant(ev: &Ev) -> Result<Val> {
    let n = match ev.term.tt {
        T::MONDAY | T::JANUARY => 1,
        T::TUESDAY | T::FEBRUARY => 2,
        T::WEDNESDAY | T::MARCH => 3,
        T::THURSDAY | T::APRIL => 4,
        T::FRIDAY | T::MAY => 5,
        T::SATURDAY | T::JUNE => 6,
        T::SUNDAY | T::JULY => 7,
        T::AUGUST => 8,
        T::SEPTEMBER => 9,
        T::OCTOBER => 10,
        T::NOVEMBER => 11,
        T::DECEMBER => 12,
        other => return Err(logic(format!("`{}` is not a time constant.", other.name()))),
    };
    num(f64::from(n))
}

/// TIME: `r.time(y, m, d, tz)` or `r.time(y, m, d, h, min, s, tz)`.
pub fn time(ev: &Ev) -> Result<Val> {
    let n = ev.nargs();
    if n != 4 && n != 7 {
        return Err(logic(format!(
            "Got {n} arguments to TIME (expected 4 or 7)."
        )));
    }
    let year = int_arg(ev, 0)?;
    let month = int_arg(ev, 1)?;
    let day = int_arg(ev, 2)?;
    let (hours, minutes, seconds, tz) = if n == 4 {
        (0, 0, 0.0, ev.string(3)?)
    } else {
        (int_arg(ev, 3)?, int_arg(ev, 4)?, ev.num(5)?, ev.string(6)?)
    };
    let days = checked_days(year, month, day).map_err(logic)?;
    let tz = sanitize_tz(&tz).map_err(logic)?;
    let local_us = i128::from(days) * US_PER_DAY
        + i128::from(hours) * 3600 * US_PER_SEC
        + i128::from(minutes) * 60 * US_PER_SEC
        + epoch_us(seconds);
    let utc_us = local_us - i128::from(tz_offset(&tz)) * US_PER_SEC;
    Ok(Val::Datum(new_time(utc_us as f64 / 1e6, &tz)))
}

/// EPOCH_TIME.
pub fn epoch_time(ev: &Ev) -> Result<Val> {
    let n = ev.num(0)?;
    Ok(Val::Datum(new_time(n, "+00:00")))
}

/// ISO8601 (`default_timezone` optarg).
pub fn iso8601(ev: &Ev) -> Result<Val> {
    let s = ev.string(0)?;
    let default_tz = match ev.opt_datum("default_timezone")? {
        None => String::new(),
        Some(d) => expect_str(&d).at_opt("default_timezone")?.to_string(),
    };
    let (epoch, tz) = parse_iso8601(&s, &default_tz).map_err(logic).at(0)?;
    Ok(Val::Datum(new_time(epoch, &tz)))
}

/// TO_ISO8601.
pub fn to_iso8601(ev: &Ev) -> Result<Val> {
    let (_, epoch, tz) = time_arg(ev, 0)?;
    let s = format_iso8601(epoch, &tz).map_err(logic)?;
    Ok(Val::Datum(Datum::from(s)))
}

/// TO_EPOCH_TIME.
pub fn to_epoch_time(ev: &Ev) -> Result<Val> {
    let (_, epoch, _) = time_arg(ev, 0)?;
    num(epoch)
}

/// IN_TIMEZONE.
pub fn in_timezone(ev: &Ev) -> Result<Val> {
    let (_, epoch, _) = time_arg(ev, 0)?;
    let d = ev.datum(1)?;
    let raw = expect_str(&d).at(1)?;
    let tz = sanitize_tz(raw).map_err(logic)?;
    Ok(Val::Datum(new_time(epoch, &tz)))
}

/// TIMEZONE.
pub fn timezone(ev: &Ev) -> Result<Val> {
    let (d, _, _) = time_arg(ev, 0)?;
    Ok(Val::Datum(
        d.get("timezone").cloned().unwrap_or(Datum::Null),
    ))
}

/// DURING (`left_bound` default closed, `right_bound` default open).
pub fn during(ev: &Ev) -> Result<Val> {
    let (_, t, _) = time_arg(ev, 0)?;
    let (_, lo, _) = time_arg(ev, 1)?;
    let (_, hi, _) = time_arg(ev, 2)?;
    let left_open = ev.opt_open("left_bound", false)?;
    let right_open = ev.opt_open("right_bound", true)?;
    let lcmp = lo.total_cmp(&t);
    let rcmp = t.total_cmp(&hi);
    let outside =
        lcmp.is_gt() || (lcmp.is_eq() && left_open) || rcmp.is_gt() || (rcmp.is_eq() && right_open);
    Ok(Val::Datum(Datum::Bool(!outside)))
}

/// DATE: local midnight of the same day, same zone.
pub fn date(ev: &Ev) -> Result<Val> {
    let (_, epoch, tz) = time_arg(ev, 0)?;
    let c = Civil::of(epoch, tz_offset(&tz)).map_err(logic)?;
    let midnight = c.days as f64 * 86_400.0 - tz_offset(&tz) as f64;
    Ok(Val::Datum(new_time(midnight, &tz)))
}

/// TIME_OF_DAY: seconds since local midnight.
pub fn time_of_day(ev: &Ev) -> Result<Val> {
    let (_, epoch, tz) = time_arg(ev, 0)?;
    let c = Civil::of(epoch, tz_offset(&tz)).map_err(logic)?;
    num(round_ms(c.day_us as f64 / 1e6))
}

/// YEAR, MONTH, DAY, DAY_OF_WEEK, DAY_OF_YEAR, HOURS, MINUTES, SECONDS.
pub fn portion(ev: &Ev) -> Result<Val> {
    let (_, epoch, tz) = time_arg(ev, 0)?;
    let c = Civil::of(epoch, tz_offset(&tz)).map_err(logic)?;
    let (h, m, s) = c.hms();
    let v = match ev.term.tt {
        T::YEAR => c.year as f64,
        T::MONTH => c.month as f64,
        T::DAY => c.day as f64,
        T::DAY_OF_WEEK => c.weekday() as f64,
        T::DAY_OF_YEAR => c.day_of_year() as f64,
        T::HOURS => h as f64,
        T::MINUTES => m as f64,
        _ => {
            // RethinkDB adds the epoch's rounded fraction to the whole seconds, the
            // fraction as C's `modf` gives it: negative before 1970, so
            // `epoch_time(-1.5).seconds()` is 58 - 0.5 = 57.5.
            let frac = round_ms(epoch - epoch.trunc());
            s as f64 + frac
        }
    };
    num(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tz_sanitizer() {
        assert_eq!(sanitize_tz("Z").as_deref(), Ok("+00:00"));
        assert_eq!(sanitize_tz("+00").as_deref(), Ok("+00:00"));
        assert_eq!(sanitize_tz("-0700").as_deref(), Ok("-07:00"));
        assert_eq!(sanitize_tz("+24:59").as_deref(), Ok("+24:59"));
        assert_eq!(
            sanitize_tz(""),
            Err("Timezone `` does not start with `-` or `+`.".into())
        );
        assert_eq!(
            sanitize_tz("-00"),
            Err("`-00` is not a valid time offset.".into())
        );
        assert_eq!(
            sanitize_tz("UTC+00"),
            Err("Timezone `UTC+00` does not start with `-` or `+`.".into())
        );
        assert_eq!(
            sanitize_tz("+00:60"),
            Err("Minutes out of range in `+00:60`.".into())
        );
        assert_eq!(
            sanitize_tz("+25:00"),
            Err("Hours out of range in `+25:00`.".into())
        );
        assert_eq!(
            sanitize_tz("+07+01"),
            Err("Invalid date string `+07+01` (got `+` but expected a digit).".into())
        );
        assert!(sanitize_tz("-7").is_err());
        assert!(sanitize_tz("-07:-1").is_err());
        assert!(sanitize_tz("+07:00x").is_err());
    }

    #[test]
    fn calendar_round_trip() {
        for days in [-719_468, -1, 0, 1, 11_016, 15_917, 2_932_896, 3_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(
            days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28),
            2
        );
        assert_eq!(
            days_from_civil(1900, 3, 1) - days_from_civil(1900, 2, 28),
            1
        );
        assert!(checked_days(2012, 2, 29).is_ok());
        assert_eq!(
            checked_days(2013, 2, 29),
            Err("Error in time logic: Day of month is not valid for year.".into())
        );
        assert_eq!(
            checked_days(2013, 13, 1),
            Err("Error in time logic: Month number is out of range 1..12.".into())
        );
        assert_eq!(
            checked_days(1399, 1, 1),
            Err("Error in time logic: Year is out of valid range: 1400..10000.".into())
        );
    }

    #[test]
    fn portions() {
        let c = Civil::of(1375147296.681, 0).unwrap();
        assert_eq!((c.year, c.month, c.day), (2013, 7, 30));
        assert_eq!(c.weekday(), 2);
        assert_eq!(c.day_of_year(), 211);
        assert_eq!(c.hms(), (1, 21, 36));
        let c = Civil::of(2375147296.681, 0).unwrap();
        assert_eq!(
            (c.year, c.month, c.day, c.weekday(), c.day_of_year()),
            (2045, 4, 7, 5, 97)
        );
        // Day boundary: 23:30 UTC is the next day at +01:00 and the same day at -01:00.
        let t = 1375140600.0; // 2013-07-29T23:30:00Z
        assert_eq!(Civil::of(t, 3600).unwrap().day, 30);
        assert_eq!(Civil::of(t, -3600).unwrap().day, 29);
        assert_eq!(Civil::of(t, 59 * 60).unwrap().day, 30);
        // Leap day and weekday of a Sunday.
        let c = Civil::of(951782400.0, 0).unwrap(); // 2000-02-29
        assert_eq!(
            (c.month, c.day, c.weekday(), c.day_of_year()),
            (2, 29, 2, 60)
        );
        let c = Civil::of(1375574400.0, 0).unwrap(); // 2013-08-04, a Sunday
        assert_eq!(c.weekday(), 7);
        // Before the epoch.
        let c = Civil::of(-1.0, 0).unwrap();
        assert_eq!(
            (c.year, c.month, c.day, c.hms()),
            (1969, 12, 31, (23, 59, 59))
        );
        assert_eq!(Civil::of(253430000000.0, 0).unwrap().year, 10000);
        assert!(Civil::of(253440000000.0, 0).is_err());
        assert_eq!(Civil::of(-17980000000.0, 0).unwrap().year, 1400);
        assert!(Civil::of(-17990000000.0, 0).is_err());
        assert!(Civil::of(1e300, 0).is_err());
    }

    #[test]
    fn iso8601_printing() {
        assert_eq!(
            format_iso8601(1375242965.0, "-07:00").unwrap(),
            "2013-07-30T20:56:05-07:00"
        );
        assert_eq!(
            format_iso8601(1375147296.68, "-07:00").unwrap(),
            "2013-07-29T18:21:36.680-07:00"
        );
        assert_eq!(
            format_iso8601(1.444, "+00:00").unwrap(),
            "1970-01-01T00:00:01.444+00:00"
        );
        assert_eq!(
            format_iso8601(253430000000.0, "+00:00"),
            Err("Year `10000` out of valid ISO 8601 range [0, 9999].".into())
        );
    }

    #[test]
    fn iso8601_parsing() {
        let p = |s: &str| parse_iso8601(s, "");
        assert_eq!(
            p("2013-07-30T20:56:05-07:00"),
            Ok((1375242965.0, "-07:00".into()))
        );
        let dates = [
            "2013",
            "2013-01",
            "2013-01-01",
            "20130101",
            "2013-001",
            "2013001",
        ];
        let times = [
            "13",
            "13:00",
            "1300",
            "13:00:00",
            "13:00:00.000000",
            "130000.000000",
        ];
        let tzs = ["Z", "+00", "+0000", "+00:00"];
        for d in dates {
            for t in times {
                for z in tzs {
                    let s = format!("{d}T{t}{z}");
                    let (e, tz) = p(&s).unwrap();
                    assert_eq!(
                        format_iso8601(e, &tz).unwrap(),
                        "2013-01-01T13:00:00+00:00",
                        "{s}"
                    );
                }
            }
        }
        for d in ["201301", "2013-0101", "2a13", "2013+01", "2013-01-01.1"] {
            assert!(p(&format!("{d}T13:00:00Z")).is_err(), "{d}");
        }
        for t in ["a3", "13:0000", "13:000", "13:00.00", "130000.00000000a"] {
            assert!(p(&format!("2013-01-01T{t}Z")).is_err(), "{t}");
        }
        for z in ["X", "-7", "-07:-1", "+07+01", "PST", "UTC", "Z+00"] {
            assert!(p(&format!("2013-01-01T13:00:00{z}")).is_err(), "{z}");
        }
        assert_eq!(
            p("2013-07-30T20:56:05"),
            Err("ISO 8601 string has no time zone, and no default time zone was provided.".into())
        );
        assert_eq!(
            parse_iso8601("2013-07-30T20:56:05", "-07"),
            Ok((1375242965.0, "-07:00".into()))
        );
        assert_eq!(
            parse_iso8601("2013-07-30", "Z"),
            Ok((1375142400.0, "+00:00".into()))
        );
        assert_eq!(
            p("2013-02-30T00:00Z"),
            Err("Error in time logic: Day of month is not valid for year.".into())
        );
        assert!(p("2013-W01-1T00:00Z")
            .unwrap_err()
            .starts_with("Due to limitations"));
        assert_eq!(p("2013-01-01T1"), Err(truncated("1")));
        let (e, _) = p("2012-12-31T23:59:59.9999+01:00").unwrap();
        assert_eq!(e, 1356994799.999);
    }

    #[test]
    fn millisecond_rounding() {
        assert_eq!(round_ms(1.4444445), 1.444);
        assert_eq!(round_ms(1375147296.6812), 1375147296.681);
        assert_eq!(epoch_us(1375147296.681) % 1_000_000, 681_000);
    }
}
