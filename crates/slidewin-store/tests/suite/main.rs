//! slidewin-store's tests, one binary: the counts carried across a reload, and what each
//! backend says of itself.

mod carry;
mod denials;
mod settle;
mod settle_redis;
mod state;
