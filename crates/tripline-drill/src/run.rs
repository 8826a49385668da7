//! Running a drill: open the target, drive the load, switch each phase's
//! fault on and off on schedule, watch the abort rule, then measure.
//!
//! Faults are switched through the admin API with a TTL of the phase's
//! length plus a margin, and removed at the phase's end; on Ctrl-C or an
//! abort every fault still on is removed before returning. A drill
//! process killed outright leaves each fault on until its TTL.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::DrillError;
use crate::file::Drill;
use crate::load::{Samples, drive};
use crate::measure::measure;
use crate::target::Live;
use crate::verdict::Outcome;

/// Why the schedule stopped early.
enum Stopped {
    Aborted(String),
    Interrupted,
    Failed(String),
}

/// Runs `drill` in real time against its target and judges it.
pub async fn run(drill: &Drill) -> Result<Outcome, DrillError> {
    // Transitions and samples count from this instant; connecting happens
    // before, so the load starts a moment later at `start`.
    let start = Instant::now() + Duration::from_millis(200);
    let live = Live::open(drill, start).await?;
    live.admin.check().await?;
    let tries_before = live.admin.tries().await.map_err(DrillError::Target)?;
    tokio::time::sleep_until(start).await;

    let samples = Samples::default();
    let (stop_tx, stop_rx) = watch::channel(false);
    let load = tokio::spawn(drive(
        drill.load.clone(),
        live.url.clone(),
        start,
        samples.clone(),
        stop_rx,
    ));
    let stopped = schedule(drill, &live, start, &samples).await;
    let _ = stop_tx.send(true);
    let totals = load.await.unwrap_or_default();
    let tries_after = live.admin.tries().await.ok();
    let transitions = live.transitions.snapshot();
    let lost = live.transitions.stream_lost();
    live.close().await;
    if lost {
        return Err(DrillError::Target(
            "the proxy's event stream (/api/events) ended during the drill: transitions after it are unknown".to_owned(),
        ));
    }
    let aborted = match stopped {
        Ok(()) => None,
        Err(Stopped::Interrupted) => return Err(DrillError::Interrupted),
        Err(Stopped::Failed(e)) => return Err(DrillError::Target(e)),
        Err(Stopped::Aborted(why)) => Some(why),
    };
    let samples = samples.all();
    let tries = tries_after.map(|after| after - tries_before);
    Ok(measure(drill, samples, transitions, totals, tries, aborted))
}

/// Switches the phases' faults on and off until the load's duration
/// ends; stops early on Ctrl-C or when the abort rule fires. Every fault
/// it switched on is off when it returns.
async fn schedule(
    drill: &Drill,
    live: &Live,
    start: Instant,
    samples: &Samples,
) -> Result<(), Stopped> {
    let mut actions: Vec<(Duration, usize, bool)> = Vec::new();
    for (i, p) in drill.phases.iter().enumerate() {
        actions.push((p.from, i, true));
        actions.push((p.to, i, false));
    }
    // Off before on at the same instant: back-to-back phases never overlap.
    actions.sort_by_key(|(t, _, on)| (*t, *on));
    let mut live_faults: Vec<(usize, u64)> = Vec::new();
    let mut actions = actions.into_iter();
    let end = start + drill.load.duration;
    let mut next = actions.next();
    let mut abort_check =
        tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
    let result = loop {
        let due = next.as_ref().map_or(end, |(t, _, _)| start + *t);
        tokio::select! {
            _ = tokio::time::sleep_until(due) => {}
            _ = tokio::signal::ctrl_c() => break Err(Stopped::Interrupted),
            _ = abort_check.tick() => {
                if let Some(why) = check_abort(drill, start, samples) {
                    break Err(Stopped::Aborted(why));
                }
                continue;
            }
        }
        let Some((_, i, on)) = next.take() else {
            break Ok(());
        };
        let phase = &drill.phases[i];
        if on {
            let endpoint = phase
                .endpoint
                .as_ref()
                .map(|e| live.upstreams.get(e).cloned().unwrap_or_else(|| e.clone()));
            match live.admin.add_fault(phase, endpoint.as_deref()).await {
                Ok(id) => live_faults.push((i, id)),
                Err(e) => break Err(Stopped::Failed(e)),
            }
        } else if let Some(pos) = live_faults.iter().position(|(p, _)| *p == i) {
            let (_, id) = live_faults.remove(pos);
            if let Err(e) = live.admin.remove_fault(id).await {
                break Err(Stopped::Failed(e));
            }
        }
        next = actions.next();
    };
    for (_, id) in live_faults {
        // Best effort: a fault that cannot be removed still ends with its TTL.
        let _ = live.admin.remove_fault(id).await;
    }
    result
}

/// The abort rule over whole seconds completed so far: errors among the
/// answers that completed in each second, counting only the seconds the
/// rule looks at (healthy ones, unless `during = "any"`).
fn check_abort(drill: &Drill, start: Instant, samples: &Samples) -> Option<String> {
    let rule = drill.abort.as_ref()?;
    let now = Instant::now().saturating_duration_since(start).as_secs();
    let per_second = samples.per_second_before(now);
    let need = rule.sustained.as_secs();
    let mut streak = 0;
    for (second, (answers, errors)) in per_second.iter().enumerate() {
        let at = Duration::from_secs(second as u64);
        let counted = rule.during_faults || drill.phase_at(at).is_none();
        let over = *answers > 0 && (*errors as f64 / *answers as f64) > rule.error_rate_above;
        streak = if counted && over { streak + 1 } else { 0 };
        if streak >= need {
            return Some(format!(
                "error rate above {} for {need}s (seconds {}-{})",
                rule.error_rate_above,
                second as u64 + 1 - need,
                second + 1
            ));
        }
    }
    None
}
