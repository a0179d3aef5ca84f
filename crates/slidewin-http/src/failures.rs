//! [`Failures`]: what a layer that judges a service by its calls (the circuit breaker's, the
//! shedding's) counts as a failed call.

use http::{Response, response};

/// A predicate on a response's head: `true` for a failure.
pub(crate) type FailureFn = dyn Fn(&response::Parts) -> bool + Send + Sync;

/// A `5xx`, or what `is_failure` says of the head; and the wrapped service's error unless
/// `count_inner_errors` is off.
pub(crate) struct Failures {
    /// `None`: a `5xx` fails, read without taking the response apart.
    pub(crate) is_failure: Option<Box<FailureFn>>,
    pub(crate) count_inner_errors: bool,
}

impl Default for Failures {
    fn default() -> Failures {
        Failures {
            is_failure: None,
            count_inner_errors: true,
        }
    }
}

impl Failures {
    /// Whether a response is a failure, taking its head apart only for a predicate.
    pub(crate) fn failed<T>(&self, response: Response<T>) -> (Response<T>, bool) {
        match &self.is_failure {
            None => {
                let failed = response.status().is_server_error();
                (response, failed)
            }
            Some(is_failure) => {
                let (head, body) = response.into_parts();
                let failed = is_failure(&head);
                (Response::from_parts(head, body), failed)
            }
        }
    }
}
