//! Bytes per breaker: constructors of one breaker (or one layered
//! service) per library, for the allocation runner to measure the heap it
//! keeps plus the handle itself.

use std::any::Any;
use std::sync::Arc;

use tower::Layer as _;

use super::closed;
use super::layers::echo;

/// One library's breaker, built on demand.
#[derive(Clone, Copy, Debug)]
pub struct Footprint {
    /// Library and variant, as in the workload tables.
    pub name: &'static str,
    /// Builds one breaker, boxed (the box holds the handle: its size counts).
    pub build: fn() -> Box<dyn Any>,
    /// The library's own estimate, where it has one.
    pub reported: Option<fn() -> usize>,
}

/// One breaker per library, with the configurations of the `closed` workload.
pub fn footprints() -> Vec<Footprint> {
    vec![
        Footprint {
            name: "tripline",
            build: || Box::new(closed::tripline_default()),
            reported: Some(|| closed::tripline_default().memory_footprint()),
        },
        Footprint {
            name: "tripline_layer",
            build: || {
                Box::new(
                    tripline::tower::CircuitBreakerLayer::new(closed::tripline_default())
                        .layer(echo()),
                )
            },
            reported: None,
        },
        Footprint {
            name: "recloser",
            build: || Box::new(closed::recloser_default()),
            reported: None,
        },
        Footprint {
            name: "failsafe_default",
            build: || {
                Box::new(
                    failsafe::Config::new()
                        .failure_policy(closed::failsafe_default_policy())
                        .build(),
                )
            },
            reported: None,
        },
        Footprint {
            name: "failsafe_consecutive",
            build: || {
                Box::new(
                    failsafe::Config::new()
                        .failure_policy(failsafe::failure_policy::consecutive_failures(
                            5,
                            failsafe::backoff::constant(std::time::Duration::from_secs(5)),
                        ))
                        .build(),
                )
            },
            reported: None,
        },
        Footprint {
            name: "circuitbreaker_rs",
            build: || Box::new(Arc::new(closed::circuitbreaker_rs_default())),
            reported: None,
        },
        Footprint {
            name: "tower_resilience",
            build: || {
                let _rt = crate::runtime().enter();
                Box::new(super::layers::tower_resilience_breaker().layer(echo()))
            },
            reported: None,
        },
        Footprint {
            name: "seatbelt",
            build: || Box::new(super::layers::seatbelt_service()),
            reported: None,
        },
    ]
}

/// Memory of 20 000 keyed breakers: filled in once `BreakerRegistry` lands.
pub fn keyed_footprints() -> Vec<Footprint> {
    Vec::new()
}
