//! The state every handle of a cluster shares, and the steps every
//! strategy is made of: tick (lazy analysis), select, run, settle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::balance::{self, BalanceState, Balancer, Tried};
use super::breakers::BreakerFamily;
use super::eject::{self, Ctx, HealthBook, streak_stats};
use super::endpoint::{Endpoint, EndpointConfig, InFlight, UNHEALTHY};
use super::set::EndpointSet;
use super::{ClusterAttempt, Unavailable};
use crate::breaker::Permit;
use crate::clock::{Clock, SharedClock, Timestamp};
use crate::endpoint::{EndpointClassifier, EndpointOutcome};
use crate::error::PolicyConfigError;
use crate::outlier::{Detector, EventHub, HubOwner, OutlierDetector};
use crate::sync::{Arc, Mutex, lock};
use crate::timeout::{Deadline, DeadlineExceeded};

pub(crate) struct Shared {
    pub(crate) name: Arc<str>,
    pub(crate) set: ArcSwap<EndpointSet>,
    pub(crate) balancer: Balancer,
    pub(crate) lb: BalanceState,
    /// Panic mode, as selection reads it (the health book decides it).
    pub(crate) panic: AtomicBool,
    pub(crate) panic_threshold: u32,
    pub(crate) outlier: Option<OutlierDetector>,
    /// Ejections, marks, panic: changed only under this lock (cold paths).
    pub(crate) health: Mutex<HealthBook>,
    pub(crate) family: BreakerFamily,
    pub(crate) clock: SharedClock,
    /// Serialises changes of the endpoint set.
    pub(crate) writer: Mutex<()>,
    pub(crate) events: EventHub,
}

impl HubOwner for Shared {
    fn hub(&self) -> &EventHub {
        &self.events
    }
}

impl Shared {
    fn ctx(&self, now: Timestamp) -> Ctx<'_> {
        Ctx {
            cluster: &self.name,
            now,
            panic_threshold: self.panic_threshold,
            panic_flag: &self.panic,
            events: Vec::new(),
        }
    }

    /// Runs the outlier analysis if its interval has passed: the lazy
    /// timer, checked once per logical call (a clock read and a load).
    #[inline]
    pub(crate) fn tick(&self) {
        if let Some(o) = &self.outlier {
            let now = self.clock.now();
            if o.due(now) {
                self.analyze_due(now);
            }
        }
    }

    /// What every strategy's call that selects endpoints does first: the
    /// due outlier pass, then the context deadline ([`Deadline::current`]),
    /// failing fast when less than `floor` is left of it (at least
    /// something must be left). The clock is read only when there is a
    /// deadline: a call without one pays no clock read for it.
    #[inline]
    pub(crate) fn begin_call(&self, floor: Duration) -> Result<Option<Deadline>, DeadlineExceeded> {
        self.tick();
        let deadline = Deadline::current();
        if let Some(d) = deadline {
            let remaining = d.instant() - self.clock.now();
            if remaining < floor.max(Duration::from_nanos(1)) {
                return Err(DeadlineExceeded { remaining, floor });
            }
        }
        Ok(deadline)
    }

    #[cold]
    fn analyze_due(&self, now: Timestamp) {
        if let Some(o) = &self.outlier
            && o.claim(now)
        {
            self.run_analysis(o, now);
        }
    }

    /// One analysis pass now.
    pub(crate) fn analyze_now(&self) {
        if let Some(o) = &self.outlier {
            let now = self.clock.now();
            o.reschedule(now);
            self.run_analysis(o, now);
        }
    }

    fn run_analysis(&self, o: &OutlierDetector, now: Timestamp) {
        let mut ctx = self.ctx(now);
        {
            // The set is loaded under the health lock, which set updates
            // also hold: the book's counts always describe this set.
            let mut book = lock(&self.health);
            let set = self.set.load();
            eject::analyze(&o.config, &mut book, &set, &mut ctx);
        }
        self.events.emit(&ctx.events);
    }

    /// Chooses an endpoint of `set` not in `tried` and takes its permit.
    #[inline]
    pub(crate) fn pick<'s>(
        &self,
        set: &'s EndpointSet,
        tried: &Tried,
    ) -> Option<(usize, Permit<'s>)> {
        let panic = self.panic.load(Ordering::Relaxed);
        balance::select(
            self.balancer,
            &self.lb,
            set,
            panic,
            tried,
            balance::borrowed,
        )
    }

    /// Runs one attempt on endpoint `i` of `set` under `permit`, and
    /// records its outcome on the breaker and the outlier detector.
    #[inline]
    pub(crate) fn attempt<T, E, C>(
        &self,
        e: &Endpoint,
        permit: Permit<'_>,
        attempt: &ClusterAttempt,
        classifier: &C,
        op: impl FnOnce(&Endpoint, &ClusterAttempt) -> Result<T, E>,
    ) -> (EndpointOutcome, Result<T, E>)
    where
        C: EndpointClassifier<T, E> + ?Sized,
    {
        let _in_flight = InFlight::new(e);
        let start = self.clock.now();
        let result = match attempt.deadline {
            Some(d) => d.scope(|| op(e, attempt)),
            None => op(e, attempt),
        };
        let outcome = self.settle(e, permit, start, classifier, &result);
        (outcome, result)
    }

    /// What follows every attempt, blocking or awaited alike: classify the
    /// result, record it on the breaker (with the time since `start`) and
    /// on the outlier detector. One place, so the two flavours of attempt
    /// cannot record differently.
    #[inline]
    fn settle<T, E, C>(
        &self,
        e: &Endpoint,
        permit: Permit<'_>,
        start: Timestamp,
        classifier: &C,
        result: &Result<T, E>,
    ) -> EndpointOutcome
    where
        C: EndpointClassifier<T, E> + ?Sized,
    {
        let elapsed = self.clock.now() - start;
        let outcome = classifier.classify(result);
        permit.record(outcome.breaker_outcome(), elapsed);
        self.record_outlier(e, outcome);
        outcome
    }

    /// Feeds an outcome to the outlier detector (nothing without one).
    #[inline]
    pub(crate) fn record_outlier(&self, e: &Endpoint, outcome: EndpointOutcome) {
        if let Some(o) = &self.outlier
            && let Some(d) = e.inner.outlier.record(outcome, &o.thresholds)
        {
            self.on_streak(e, d);
        }
    }

    /// A streak reached its threshold: eject now (if allowed).
    #[cold]
    fn on_streak(&self, e: &Endpoint, d: Detector) {
        let Some(o) = &self.outlier else {
            return;
        };
        let (threshold, enforcing) = o.streak_enforcing(d);
        let mut ctx = self.ctx(self.clock.now());
        {
            let mut book = lock(&self.health);
            let set = self.set.load();
            if !set.endpoints.iter().any(|x| x.ptr_eq(e)) {
                return; // it left the cluster meanwhile
            }
            let stats = streak_stats(e, d, threshold);
            book.try_eject(&o.config, e, set.len(), d, stats, enforcing, &mut ctx);
        }
        self.events.emit(&ctx.events);
    }

    /// Why nothing could be selected (counts read now; a cold path).
    #[cold]
    pub(crate) fn unavailable(&self, set: &EndpointSet, tried: &Tried) -> Unavailable {
        let panic = self.panic.load(Ordering::Relaxed);
        let e = set.endpoints.iter();
        Unavailable {
            cluster: self.name.clone(),
            endpoints: set.len(),
            open: e
                .clone()
                .filter(|e| !e.breaker().state().admits_freely())
                .count(),
            ejected: if panic {
                0
            } else {
                e.filter(|e| !e.is_routable()).count()
            },
            tried: tried.len(),
        }
    }

    /// Replaces the endpoint set with what `f` makes of the current
    /// configs; endpoints that stay keep their state.
    pub(crate) fn update(
        &self,
        f: impl FnOnce(Vec<EndpointConfig>) -> Result<Vec<EndpointConfig>, PolicyConfigError>,
    ) -> Result<(), PolicyConfigError> {
        let _writer = lock(&self.writer);
        let current = self.set.load_full();
        let configs = current
            .endpoints
            .iter()
            .map(|e| EndpointConfig {
                id: e.id().to_string(),
                address: e.address().to_owned(),
                weight: e.weight(),
            })
            .collect();
        let (next, gone) = current.rebuild(&f(configs)?, &self.family)?;
        let next = Arc::new(next);
        let mut ctx = self.ctx(self.clock.now());
        {
            let mut book = lock(&self.health);
            self.set.store(next.clone());
            book.recount(&next, &mut ctx);
        }
        for e in &gone {
            self.family.release(e.id(), e.breaker());
        }
        self.events.emit(&ctx.events);
        Ok(())
    }

    /// Marks `id` unhealthy or healthy; `false` if no such endpoint.
    pub(crate) fn mark(&self, id: &str, unhealthy: bool) -> bool {
        let mut ctx = self.ctx(self.clock.now());
        {
            let mut book = lock(&self.health);
            let set = self.set.load();
            let Some(i) = set.position(id) else {
                return false;
            };
            book.set_flag(&set.endpoints[i], UNHEALTHY, unhealthy, set.len(), &mut ctx);
        }
        self.events.emit(&ctx.events);
        true
    }

    /// Waits `d` between synchronous attempts: advances a `ManualClock`,
    /// or blocks the thread (the caller chose a blocking API).
    pub(crate) fn sleep_sync(&self, d: Duration) {
        if d.is_zero() {
            return;
        }
        match self.clock.as_manual() {
            Some(m) => {
                m.advance(d);
            }
            None => crate::clock::block_thread_for(d),
        }
    }
}

impl Shared {
    /// [`attempt`](Self::attempt) for a future: the permit is held across
    /// the await; if the returned future is dropped first, the permit and
    /// the in-flight count are released neutrally and nothing is recorded.
    pub(crate) async fn attempt_async<T, E, C, Fut>(
        &self,
        e: &Endpoint,
        permit: Permit<'_>,
        attempt: &ClusterAttempt,
        classifier: &C,
        fut: Fut,
    ) -> (EndpointOutcome, Result<T, E>)
    where
        C: EndpointClassifier<T, E> + ?Sized,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let _in_flight = InFlight::new(e);
        let start = self.clock.now();
        let result = match attempt.deadline {
            Some(d) => d.scope_future(fut).await,
            None => fut.await,
        };
        let outcome = self.settle(e, permit, start, classifier, &result);
        (outcome, result)
    }
}

/// Declares a strategy's classifier-less entry point: `$name(op)` is
/// `$with(&DefaultEndpointClassifier, op)`, blocking (`fn`) or awaited
/// (`async fn`). Every strategy's plain call is generated here, so all of
/// them take the operation in the same shape and classify alike; only the
/// doc, the operation's `FnMut`/`FnOnce` and the output are the
/// strategy's.
macro_rules! with_default_classifier {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident(op: $Op:ident) -> $Out:ty = $with:ident;
    ) => {
        $(#[$attr])*
        $vis fn $name<T, E>(
            &self,
            op: impl $Op(&$crate::cluster::Endpoint, &$crate::cluster::ClusterAttempt) -> Result<T, E>,
        ) -> $Out {
            self.$with(&$crate::endpoint::DefaultEndpointClassifier, op)
        }
    };
    (
        $(#[$attr:meta])*
        $vis:vis async fn $name:ident(op: $Op:ident) -> $Out:ty = $with:ident;
    ) => {
        $(#[$attr])*
        $vis async fn $name<T, E, F, Fut>(&self, op: F) -> $Out
        where
            F: $Op($crate::cluster::Endpoint, $crate::cluster::ClusterAttempt) -> Fut,
            Fut: ::std::future::Future<Output = Result<T, E>>,
        {
            self.$with(&$crate::endpoint::DefaultEndpointClassifier, op).await
        }
    };
}
pub(crate) use with_default_classifier;
