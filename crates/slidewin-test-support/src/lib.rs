//! What slidewin's tests and benches share, so that none reaches into another crate's files:
//!
//! - [`counting_alloc`]: a global allocator that counts the bytes held, for memory figures that
//!   are measured, not estimated;
//! - [`redis`]: `redis-server` processes of the tests' own, single or as a cluster, on free
//!   ports of 127.0.0.1, stopped when dropped; [`sentinel`]: a primary, its replica and a
//!   Redis Sentinel watching them;
//! - `lodash` (feature `lodash`): lodash's `debounce` as a model on a perfect event loop,
//!   and proptest's strategies for the options and calls the debounce tests run through it.
//!
//! Not published: it exists for this workspace's tests.

pub mod counting_alloc;
#[cfg(feature = "lodash")]
pub mod lodash;
pub mod redis;
pub mod sentinel;

#[cfg(test)]
mod architecture_paths;
