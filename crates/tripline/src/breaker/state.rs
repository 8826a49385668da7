//! The breaker's states and the packed state word they live in.
//!
//! All of a breaker's state that admission needs is one `u64`, so that the
//! closed path is a single atomic load and every transition is a single CAS:
//!
//! ```text
//!  63                                 4   3   2   0
//! +------------------------------------+---+-------+
//! |            generation              | B | state |
//! +------------------------------------+---+-------+
//! ```
//!
//! The generation increases by one on every transition, so a permit that
//! remembers it can tell whether the state it was admitted under still holds.
//! `B` (busy) is set by the one thread that won a transition while it
//! publishes the new state's data (open deadline, half-open start); `state`
//! already names the target state then. Busy is held for a few stores and no
//! user code runs under it.

use std::fmt;

/// The state of a circuit breaker.
///
/// `Closed`, `Open` and `HalfOpen` move on their own; the operator states
/// `ForcedOpen`, `Disabled` and `MetricsOnly` never do, and are left only by
/// an explicit operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[repr(u8)]
pub enum State {
    /// Calls flow; every outcome is sampled into the window.
    Closed = 0,
    /// An operator switched the breaker off: calls flow and are recorded,
    /// but it never trips.
    Disabled = 1,
    /// Shadow mode: calls flow and are recorded, and the breaker reports
    /// when it *would* trip, but it never rejects.
    MetricsOnly = 2,
    /// Calls are rejected locally until the open duration has elapsed.
    Open = 3,
    /// A few probe calls test whether the dependency has recovered.
    HalfOpen = 4,
    /// An operator isolated the dependency: every call is rejected.
    ForcedOpen = 5,
}

impl State {
    /// All states, in code order.
    pub const ALL: [State; 6] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
        State::MetricsOnly,
    ];

    /// The snake_case name used in config, events and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
            State::MetricsOnly => "metrics_only",
        }
    }

    /// Whether calls are admitted without a probe slot.
    pub const fn admits_freely(self) -> bool {
        matches!(self, State::Closed | State::Disabled | State::MetricsOnly)
    }

    /// Whether only an operator can leave this state.
    pub const fn is_operator_state(self) -> bool {
        matches!(
            self,
            State::ForcedOpen | State::Disabled | State::MetricsOnly
        )
    }

    const fn from_code(code: u64) -> State {
        match code {
            0 => State::Closed,
            1 => State::Disabled,
            2 => State::MetricsOnly,
            3 => State::Open,
            4 => State::HalfOpen,
            _ => State::ForcedOpen,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const STATE_MASK: u64 = 0b111;
const BUSY: u64 = 0b1000;
const GEN_SHIFT: u32 = 4;

/// A decoded state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(pub(crate) u64);

impl Word {
    /// The word of a breaker created in `state`.
    pub(crate) const fn initial(state: State) -> Word {
        Word(state as u64)
    }

    #[inline]
    pub(crate) const fn state(self) -> State {
        State::from_code(self.0 & STATE_MASK)
    }

    #[inline]
    pub(crate) const fn generation(self) -> u64 {
        self.0 >> GEN_SHIFT
    }

    /// Whether calls are admitted without a probe slot: a freely admitting
    /// state (codes 0..=2, chosen contiguous for this test) that is not
    /// mid-transition. One compare on the hot path.
    #[inline]
    pub(crate) const fn admits_freely(self) -> bool {
        self.0 & (STATE_MASK | BUSY) <= State::MetricsOnly as u64
    }

    /// `Open` and not mid-transition.
    #[inline]
    pub(crate) const fn is_open_idle(self) -> bool {
        self.0 & (STATE_MASK | BUSY) == State::Open as u64
    }

    #[inline]
    pub(crate) const fn is_busy(self) -> bool {
        self.0 & BUSY != 0
    }

    /// The word a transition to `to` installs while it publishes: the next
    /// generation, busy.
    pub(crate) const fn begin(self, to: State) -> Word {
        Word(((self.generation() + 1) << GEN_SHIFT) | BUSY | to as u64)
    }

    /// The same state and generation, busy: held while a change that is not
    /// a transition (an open deadline moved) publishes its data.
    pub(crate) const fn held(self) -> Word {
        Word(self.0 | BUSY)
    }

    /// The same word with busy cleared.
    pub(crate) const fn published(self) -> Word {
        Word(self.0 & !BUSY)
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}{}",
            self.state(),
            self.generation(),
            if self.is_busy() { "(busy)" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_round_trips_state_generation_and_busy() {
        for s in State::ALL {
            let w = Word::initial(State::Closed).begin(s);
            assert_eq!(w.state(), s);
            assert_eq!(w.generation(), 1);
            assert!(w.is_busy());
            let p = w.published();
            assert!(!p.is_busy());
            assert_eq!((p.state(), p.generation()), (s, 1));
            assert_eq!(p.begin(State::Closed).generation(), 2);
            assert_eq!(p.admits_freely(), s.admits_freely());
            assert!(!w.admits_freely());
        }
    }
}
