//! Fleet-wide overrides as one applier carries them out, and the timer
//! that ends them on time.
//!
//! The document in force lists the overrides; the applier holds each
//! named breaker (or every breaker of a named family, present and future)
//! in its state while `until` is ahead on its own clock
//! (wall time is the applier's clock plus the wall-clock instant it read
//! zero at, so a `ManualClock` drives expiry in tests), and resets it when
//! the override expires or a document lifts it. Every start and end is an
//! audit record carrying the override's author and reason.
//!
//! A local override (the admin API's force-open, disable, metrics-only on
//! this one instance) holds over a fleet override while it lasts: the
//! operator at the box acts on what they see. Clearing it hands the
//! breaker back to the fleet override, if one is in force.

use std::time::{Duration, SystemTime};

use tripline::Clock;
use tripline::clock::Timestamp;

use super::{Applier, Core, Origin};
use crate::audit::AuditAction;
use crate::document::{Document, FleetOverride};

/// The longest the override timer sleeps with nothing due: bounds how
/// late a clock step (NTP, a suspended VM) is noticed.
const IDLE_WAIT: Duration = Duration::from_secs(60);

/// Which override holds a breaker, as [`ManagedStatus`](super::ManagedStatus) reports it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideHolder {
    /// The fleet's document: `[[override]]`, until it expires or is lifted.
    Fleet,
    /// This instance's operator (the admin API), until reset.
    Local,
}

impl Applier {
    /// The wall-clock time now, on the applier's clock.
    pub fn wall_now(&self) -> SystemTime {
        self.shared.wall_epoch + self.shared.clock.now().as_duration()
    }

    /// How long until the next fleet override ends or a profile of the
    /// document in force starts or ends, on the applier's clock.
    pub fn until_next_change(&self) -> Option<Duration> {
        let core = self.core();
        let now = self.shared.clock.now();
        let override_end = core
            .fleet_overrides
            .iter()
            .map(|o| self.on_clock(o.until))
            .filter(|t| *t > now)
            .min()
            .map(|t| t.saturating_duration_since(now));
        let boundary = self.until_next_profile_boundary(&core);
        override_end.into_iter().chain(boundary).min()
    }

    /// Ends fleet overrides when their `until` comes and switches profiles
    /// at their boundaries, without waiting for a document: sleeps until
    /// the next change is due (woken early when a document arrives), then
    /// ticks. Runs until dropped; the sources spawn it beside their watch.
    pub async fn run_override_timer(self) {
        loop {
            let wait = self
                .until_next_change()
                .map_or(IDLE_WAIT, |d| d.min(IDLE_WAIT));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.shared.overrides_changed.notified() => {}
            }
            self.tick();
        }
    }

    /// Takes the overrides of the document just accepted.
    pub(super) fn take_overrides(&self, core: &mut Core, doc: &Document, origin: &Origin) {
        core.fleet_overrides.clone_from(&doc.overrides);
        core.fleet_author.clone_from(&doc.author);
        core.fleet_origin = origin.clone();
        self.shared.overrides_changed.notify_one();
    }

    /// Holds or releases every managed breaker as the overrides in force
    /// say; records each change.
    pub(super) fn reconcile_overrides(&self, core: &mut Core) {
        let now = self.shared.clock.now();
        let mut changes = Vec::new();
        for (name, managed) in &mut core.breakers {
            if managed.overridden {
                continue; // a local override holds
            }
            let named = core.fleet_overrides.iter().find(|o| &o.breaker == name);
            let active = named.filter(|o| self.on_clock(o.until) > now);
            match (active, managed.fleet) {
                (Some(o), held) if held != Some(o.state) || !managed.is_in(o.state) => {
                    managed.hold(o.state);
                    managed.fleet = Some(o.state);
                    changes.push(started(o));
                }
                (None, Some(state)) => {
                    managed.release();
                    managed.fleet = None;
                    let why = if named.is_some() { "expired" } else { "lifted" };
                    changes.push((
                        AuditAction::OverrideEnded {
                            breaker: name.clone(),
                            state,
                            why: why.to_owned(),
                        },
                        named.and_then(|o| o.author.clone()),
                        named.map(|o| o.reason.clone()),
                    ));
                }
                _ => {}
            }
        }
        for o in core
            .fleet_overrides
            .iter()
            .filter(|o| !core.breakers.contains_key(&o.breaker))
        {
            tracing::debug!(breaker = %o.breaker, "tripline-config: an override names no breaker of this instance");
        }
        let origin = core.fleet_origin.clone();
        for (action, author, reason) in changes {
            tracing::info!(
                ?action,
                reason = reason.as_deref().unwrap_or("-"),
                "tripline-config: fleet override"
            );
            let mut record = self.new_record(core, action, &origin);
            record.author = author.or_else(|| core.fleet_author.clone());
            record.comment = reason;
            self.keep(core, record);
        }
    }

    /// A wall-clock instant on the applier's clock (zero if before its epoch).
    fn on_clock(&self, t: SystemTime) -> Timestamp {
        Timestamp::from_duration(
            t.duration_since(self.shared.wall_epoch)
                .unwrap_or(Duration::ZERO),
        )
    }
}

fn started(o: &FleetOverride) -> (AuditAction, Option<String>, Option<String>) {
    (
        AuditAction::OverrideStarted {
            breaker: o.breaker.clone(),
            state: o.state,
            until: humantime::format_rfc3339_seconds(o.until).to_string(),
        },
        o.author.clone(),
        Some(o.reason.clone()),
    )
}
