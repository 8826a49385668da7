//! Weekly windows in a named time zone (`tz = "Europe/Berlin"`), with its
//! daylight-saving rules from the tz database bundled into the binary (so
//! every instance of a fleet reads the same rules, whatever its host has
//! installed).
//!
//! A zoned window is not one fixed stretch of the week: its UTC instants
//! move when the zone's offset does. So it is computed per day: on each
//! local date whose weekday is listed, it starts at `from` and ends at
//! `to` (the next day when `to` is not after `from`), each local time
//! resolved to an instant as RFC 5545 and most schedulers do:
//!
//! * a time the clocks skip (spring forward: 02:30 on a day that jumps
//!   from 02:00 to 03:00) is read as that time after the jump, shifted by
//!   the gap (03:30): a window 01:30–02:30 on that day holds from 01:30
//!   to 03:30 local, one real hour, as on any other day;
//! * a time the clocks repeat (fall back) is read as its first
//!   occurrence: a window 01:30–02:30 on a day that goes from 03:00 back to
//!   02:00 holds from 01:30 to the first 02:30, one real hour.
//!
//! So a window always lasts its nominal length in real time, except when
//! a boundary falls in a gap the other does not share.

use std::fmt;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// A weekly window in a named zone.
#[derive(Clone)]
pub(crate) struct ZonedWeekly {
    name: String,
    tz: TimeZone,
    /// Monday = 0.
    days: Vec<i8>,
    /// Seconds after local midnight.
    from: u64,
    to: u64,
}

impl fmt::Debug for ZonedWeekly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZonedWeekly")
            .field("tz", &self.name)
            .field("days", &self.days)
            .field("from", &self.from)
            .field("to", &self.to)
            .finish()
    }
}

impl PartialEq for ZonedWeekly {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, &self.days, self.from, self.to)
            == (&other.name, &other.days, other.from, other.to)
    }
}

impl Eq for ZonedWeekly {}

/// The zone named `name` from the bundled tz database, or why not.
pub(crate) fn zone(name: &str) -> Option<TimeZone> {
    // Only names with a '/' (or the bare UTC handled by the caller):
    // "EST" and other abbreviations are ambiguous by design.
    if !name.contains('/') {
        return None;
    }
    jiff::tz::db().get(name).ok()
}

impl ZonedWeekly {
    pub(crate) fn new(name: &str, tz: TimeZone, days: Vec<i8>, from: u64, to: u64) -> Self {
        ZonedWeekly {
            name: name.to_owned(),
            tz,
            days,
            from,
            to,
        }
    }

    /// The local date of Unix second `t`.
    fn local_date(&self, t: u64) -> Option<Date> {
        let ts = Timestamp::from_second(i64::try_from(t).ok()?).ok()?;
        Some(ts.to_zoned(self.tz.clone()).date())
    }

    /// `[start, end)` in Unix seconds of the window starting on `date`, if
    /// it starts on that weekday.
    fn span_on(&self, date: Date) -> Option<(u64, u64)> {
        let weekday = date.weekday().to_monday_zero_offset();
        if !self.days.contains(&weekday) {
            return None;
        }
        let end_date = if self.to > self.from {
            date
        } else {
            date.tomorrow().ok()?
        };
        let start = self.instant(date, self.from)?;
        let end = self.instant(end_date, self.to)?;
        Some((start, end.max(start)))
    }

    /// `date` at `secs` after midnight, local, resolved as the module docs say.
    fn instant(&self, date: Date, secs: u64) -> Option<u64> {
        let h = i8::try_from(secs / 3600).ok()?;
        let m = i8::try_from(secs % 3600 / 60).ok()?;
        let zoned = date.at(h, m, 0, 0).to_zoned(self.tz.clone()).ok()?;
        u64::try_from(zoned.timestamp().as_second()).ok()
    }

    /// The windows starting on the local dates `first..=last` days from
    /// `t`'s local date.
    fn spans(&self, t: u64, first: i64, last: i64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let today = self.local_date(t);
        (first..=last).filter_map(move |d| {
            let date = today?.checked_add(d.days()).ok()?;
            self.span_on(date)
        })
    }

    /// Whether it holds at Unix second `t`.
    pub(crate) fn holds(&self, t: u64) -> bool {
        // A window that holds at t started today or (past midnight) on
        // one of the two days before.
        self.spans(t, -2, 0).any(|(s, e)| (s..e).contains(&t))
    }

    /// The first instant after `t` at which it starts or ends.
    pub(crate) fn next_boundary(&self, t: u64) -> Option<u64> {
        self.spans(t, -2, 8)
            .flat_map(|(s, e)| [s, e])
            .filter(|b| *b > t)
            .min()
    }
}
