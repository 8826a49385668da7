//! Live reconfiguration and state snapshots.
//!
//! A reconfiguration validates first and changes nothing if the config is
//! refused, so the last good config stays. It swaps the settings pointer,
//! keeps the breaker's state, and moves the window's live contents into a
//! new window when the window's shape changed ("what still fits"); the old
//! window is retired once no call records into it, and its counts stay in
//! the breaker's totals (see `window/cell.rs`). Warm-up restarts, which
//! gives the optional quiet period after a change.

use std::time::{Duration, SystemTime};

use super::super::config::{CircuitBreakerConfig, ConfigError, ConfigWarning};
use super::super::event::{EventKind, Reason};
use super::super::state::State;
use super::super::window::{Window, WindowSnapshot};
use super::settings::Settings;
use super::{Entry, Inner, OpenUntil};
use crate::clock::{Clock, Timestamp, duration_until_system_time, system_time_after};
use crate::sync::{Arc, Ordering, lock, yield_now};

/// A breaker's state, as data to keep across a process restart.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Snapshot {
    /// The breaker's name.
    pub name: String,
    /// Its state. A half-open breaker is restored as open with its deadline
    /// passed: the probe round starts afresh.
    pub state: State,
    /// The live window.
    pub window: WindowSnapshot,
    /// When an open state ends, on the wall clock (so it survives the
    /// process and its monotonic clock); RFC 3339 text in serde.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::rfc3339::option", default)
    )]
    pub open_until: Option<SystemTime>,
    /// Consecutive failed probe rounds (the backoff step).
    pub backoff_round: u64,
    /// The config version at the time of the snapshot.
    pub config_version: u64,
    /// The learned slow-call threshold, if one was learned.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option", default)
    )]
    pub learned_slow_call: Option<Duration>,
}

impl Inner {
    pub(crate) fn reconfigure(
        &self,
        config: CircuitBreakerConfig,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        let warnings = config.validate()?;
        if *config.name != *self.name {
            return Err(ConfigError::new(
                "name",
                format!(
                    "cannot change on a live breaker (it keys events and metrics): {:?} → {:?}",
                    self.name, config.name
                ),
            ));
        }
        let version = self.settings.with(|s| s.version + 1);
        self.install(Arc::new(Settings::new(config, version)), &warnings);
        Ok(warnings)
    }

    /// Installs already validated `settings` — made by
    /// [`reconfigure`](Self::reconfigure), or shared by a registry family —
    /// keeping the breaker's state.
    pub(crate) fn install(&self, settings: Arc<Settings>, warnings: &[ConfigWarning]) {
        let _serial = lock(&self.cold().reconfiguring);
        let now = self.clock.now();
        let config = self.own(&settings.config);
        let version = settings.version;
        let old = self.settings.with(|s| self.own(&s.config));
        if old.window != config.window {
            let fresh = Window::new(&config.window, self.stripes());
            self.with_window(|current| fresh.absorb(current, now));
            self.windows.replace(fresh);
            // Release: a call that sees the count move sees the new window
            // in the cell. Reshapes are serialised, so load + store is exact.
            let reshapes = self.hot.reshapes.load(Ordering::Relaxed);
            self.hot.reshapes.store(reshapes + 1, Ordering::Release);
        }
        let half_open_changed = old.half_open != config.half_open;
        // Evaluations read the settings themselves until the new ones are
        // in, so none judges by the old plain thresholds under a new config
        // that varies them (a warm-up, say).
        self.rules.plain_rule.store(0, Ordering::Relaxed);
        self.rules.plain_quota.store(0, Ordering::Relaxed);
        self.cold().plain_open.store(0, Ordering::Relaxed);
        self.settings.store(settings);
        self.apply_settings_words();
        self.warm_start.store(now.as_nanos(), Ordering::Relaxed);
        let seq = self.events().reserve();
        self.events().publish_with(seq, || {
            self.event(
                now,
                EventKind::ConfigChanged {
                    version,
                    old: Box::new(old),
                    new: Box::new(config),
                    warnings: warnings.iter().map(ToString::to_string).collect(),
                },
            )
        });
        if half_open_changed {
            self.restart_half_open_round(now);
        }
    }

    /// A round under the old half-open policy cannot be judged by the new
    /// one: start a fresh round. No call can enter half-open meanwhile (it
    /// needs the lock the caller holds), so a round that started under the
    /// old rules is seen here; the only thing to wait for is another
    /// transition's few stores of its busy section, and giving up instead
    /// would leave the round under rules it was not started with.
    fn restart_half_open_round(&self, now: Timestamp) {
        loop {
            let w = self.word();
            if w.is_busy() {
                yield_now();
                continue;
            }
            if w.state() != State::HalfOpen
                || self.enter_half_open_serialised(w, now, Reason::Forced, false, None)
                    != Entry::Lost
            {
                return;
            }
        }
    }

    pub(crate) fn config_version(&self) -> u64 {
        self.settings.with(|s| s.version)
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let w = self.word();
        let now = self.clock.now();
        let open_until = self
            .open_until()
            .map(|t| system_time_after(t.saturating_duration_since(now)));
        Snapshot {
            name: self.name.to_string(),
            state: w.state(),
            window: self.window_at(now),
            open_until,
            backoff_round: self.open_round(),
            config_version: self.config_version(),
            learned_slow_call: self.baseline().and_then(|b| b.learned()),
        }
    }

    /// Puts a fresh breaker into the state `snap` describes.
    pub(crate) fn restore(&self, snap: &Snapshot) {
        let now = self.clock.now();
        self.with_window(|w| w.preload(&snap.window, now));
        self.cold()
            .open_round
            .store(snap.backoff_round, Ordering::Relaxed);
        if let (Some(d), Some(b)) = (snap.learned_slow_call, self.baseline()) {
            b.restore(d);
            self.apply_slow_threshold();
        }
        match snap.state {
            State::Closed => {}
            State::Open | State::HalfOpen => {
                let left = snap
                    .open_until
                    .map_or(Duration::ZERO, duration_until_system_time);
                let w = self.word();
                let evidence = self.evidence(self.window_at(now), now);
                self.transition_to_open(
                    w,
                    State::Open,
                    Reason::Forced,
                    evidence,
                    OpenUntil::At(now + left),
                    now,
                );
            }
            other => self.force(other, None),
        }
    }
}
