//! Running one task per cluster that follows something outside the proxy
//! (DNS answers, a registry), in step with the table: reloads replace the
//! set of follows, and the supervisor reconciles its tasks with it.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

/// The follows of the table in force, by cluster name.
pub(crate) type Follows<F> = Arc<BTreeMap<String, Arc<F>>>;

/// Runs `run(follow)` for every follow in `follows`, reconciling the tasks
/// each time a reload replaces the set: a follow no longer in it has its
/// task aborted, a new one gets one (follows are told apart by identity,
/// so a kept follow keeps its task). Ends when the proxy is gone.
pub(crate) async fn supervise<F, Fut>(
    mut follows: watch::Receiver<Follows<F>>,
    run: impl Fn(Arc<F>) -> Fut,
) where
    F: Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut tasks = JoinSet::new();
    let mut running: Vec<(Arc<F>, AbortHandle)> = Vec::new();
    loop {
        let now = follows.borrow_and_update().clone();
        running.retain(|(follow, task)| {
            let stays = now.values().any(|f| Arc::ptr_eq(f, follow));
            if !stays {
                task.abort();
            }
            stays
        });
        for follow in now.values() {
            if !running.iter().any(|(f, _)| Arc::ptr_eq(f, follow)) {
                let task = tasks.spawn(run(follow.clone()));
                running.push((follow.clone(), task));
            }
        }
        // Reap ended tasks (aborted or retired) while waiting, so that
        // many reloads leave no finished tasks behind.
        loop {
            tokio::select! {
                changed = follows.changed() => match changed {
                    Ok(()) => break,
                    Err(_) => return,
                },
                Some(_) = tasks.join_next() => {}
            }
        }
    }
}
