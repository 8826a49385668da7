//! A pipeline with a fallback outermost.

use std::fmt;
use std::future::Future;

use super::{Fallback, Served, irreversible_error};
use crate::pipeline::{AsyncAttempt, Attempt, Pipeline, PolicyConfigError, PolicyError};

/// A [`Pipeline`] with a [`Fallback`] outermost.
///
/// ```
/// use tripline::fallback::{Fallback, FallbackValue};
/// use tripline::pipeline::Pipeline;
///
/// let pay = Pipeline::builder().irreversible().build().unwrap();
/// let fb: Fallback<u32, ()> = Fallback::builder().on_any(FallbackValue::Static(0)).build().unwrap();
/// let err = pay.with_fallback(fb).unwrap_err();
/// assert_eq!(err.field, "fallback");
/// ```
pub struct FallbackPipeline<T, E> {
    pipeline: Pipeline,
    fallback: Fallback<T, E>,
}

impl<T, E> Clone for FallbackPipeline<T, E> {
    fn clone(&self) -> Self {
        FallbackPipeline {
            pipeline: self.pipeline.clone(),
            fallback: self.fallback.clone(),
        }
    }
}

impl<T, E> fmt::Debug for FallbackPipeline<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackPipeline")
            .field("pipeline", &self.pipeline)
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl Pipeline {
    /// Adds `fallback` outermost. Refused for an irreversible operation.
    pub fn with_fallback<T, E>(
        &self,
        fallback: Fallback<T, E>,
    ) -> Result<FallbackPipeline<T, E>, PolicyConfigError> {
        if self.is_irreversible() {
            return Err(irreversible_error());
        }
        Ok(FallbackPipeline {
            pipeline: self.clone(),
            fallback,
        })
    }
}

impl<T: Clone, E> FallbackPipeline<T, E> {
    /// The pipeline inside.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Runs `op` through the pipeline (sync), falling back as configured.
    pub fn call(
        &self,
        op: impl FnMut(&Attempt) -> Result<T, E>,
    ) -> Result<Served<T>, PolicyError<E>> {
        self.fallback.apply(self.pipeline.call(op))
    }

    /// Runs the futures `op` makes through the pipeline, falling back as configured.
    pub async fn call_async<F, Fut>(&self, op: F) -> Result<Served<T>, PolicyError<E>>
    where
        F: FnMut(AsyncAttempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.fallback.apply(self.pipeline.call_async(op).await)
    }
}
