//! "Retries without any timeout" is said where it is true: not when a
//! `TimeoutLayer` inside the `PipelineLayer` bounds every attempt, and
//! once when nothing does.
#![cfg(all(feature = "tower", feature = "tokio"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use tripline::pipeline::Pipeline;
use tripline::retry::RetryConfig;
use tripline::timeout::TokioTimer;
use tripline::tower::{PipelineLayer, TimeoutLayer};

/// Keeps the messages of `tripline::pipeline` warnings.
#[derive(Clone, Default)]
struct Capture {
    seen: Arc<Mutex<Vec<String>>>,
    ids: Arc<AtomicUsize>,
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "tripline::pipeline"
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.ids.fetch_add(1, Ordering::Relaxed) as u64 + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        self.seen.lock().unwrap().push(m.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn untimed_retrying_pipeline() -> Pipeline {
    let (pipeline, warnings) = Pipeline::builder()
        .retry(RetryConfig {
            max_attempts: 3,
            ..Default::default()
        })
        .build_with_warnings()
        .unwrap();
    assert!(
        warnings.iter().any(|w| w.field == "timeouts"),
        "the builder still reports it to whoever asks"
    );
    pipeline
}

fn untimed_warnings(seen: &Mutex<Vec<String>>) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|m| m.contains("retries without any timeout"))
        .count()
}

#[test]
fn a_timeout_layer_inside_the_pipeline_layer_silences_the_untimed_retries_warning() {
    let capture = Capture::default();
    let seen = capture.seen.clone();
    tracing::subscriber::with_default(capture, || {
        let pipeline = untimed_retrying_pipeline();
        let _timed = tower::ServiceBuilder::new()
            .layer(PipelineLayer::new(pipeline.clone()))
            .layer(TimeoutLayer::new(
                Duration::from_millis(100),
                Arc::new(TokioTimer),
            ))
            .service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x) });
        assert_eq!(
            untimed_warnings(&seen),
            0,
            "a TimeoutLayer bounds each attempt"
        );

        let _untimed = tower::ServiceBuilder::new()
            .layer(PipelineLayer::new(pipeline.clone()))
            .service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x) });
        let _again = tower::ServiceBuilder::new()
            .layer(PipelineLayer::new(pipeline))
            .service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x) });
        assert_eq!(untimed_warnings(&seen), 1, "said once, where it is true");
    });
}

#[test]
fn a_direct_call_of_an_untimed_retrying_pipeline_warns_once() {
    let capture = Capture::default();
    let seen = capture.seen.clone();
    tracing::subscriber::with_default(capture, || {
        let pipeline = untimed_retrying_pipeline();
        assert_eq!(untimed_warnings(&seen), 0, "nothing at build");
        for _ in 0..3 {
            pipeline.call(|_| Ok::<_, std::io::Error>(1)).unwrap();
        }
        assert_eq!(untimed_warnings(&seen), 1);
    });
}
