//! The setters of the crate's builders, written once.
//!
//! Every builder (breaker, registry, throttle, cluster, failover, hedge,
//! retry, pipeline) takes its clock, seed, budget and timer the same way:
//! a setter that stores its argument in the field of the same name and
//! hands the builder back. Some thirty of them, five lines each, repeated one
//! another to the letter; each builder now lists its setters with their
//! docs in one [`setters!`] block, and the rule lives here.
//!
//! ```text
//! setters! {
//!     /// The config.
//!     config: HedgeConfig,                 // self.config = config
//!     /// Hedges spend from `budget`.
//!     budget: Some(RetryBudget),           // self.budget = Some(budget)
//!     /// The clock latencies are measured on.
//!     clock: Some(impl Into<SharedClock>), // self.clock = Some(clock.into())
//! }
//! ```

/// Builder setters: `name: Type`, `name: Some(Type)` or
/// `name: Some(impl Into<Type>)`, each after its doc comment (see the
/// module docs).
macro_rules! setters {
    () => {};
    ($(#[$m:meta])* $name:ident: Some(impl Into<$ty:ty>), $($rest:tt)*) => {
        $(#[$m])*
        pub fn $name(mut self, $name: impl Into<$ty>) -> Self {
            self.$name = Some($name.into());
            self
        }
        $crate::setters::setters!($($rest)*);
    };
    ($(#[$m:meta])* $name:ident: Some($ty:ty), $($rest:tt)*) => {
        $(#[$m])*
        pub fn $name(mut self, $name: $ty) -> Self {
            self.$name = Some($name);
            self
        }
        $crate::setters::setters!($($rest)*);
    };
    ($(#[$m:meta])* $name:ident: $ty:ty, $($rest:tt)*) => {
        $(#[$m])*
        pub fn $name(mut self, $name: $ty) -> Self {
            self.$name = $name;
            self
        }
        $crate::setters::setters!($($rest)*);
    };
}
pub(crate) use setters;
