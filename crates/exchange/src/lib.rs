//! The shard exchange: how the N shards of one run (a sweep's points, a lab's launches and
//! profile runs) tell each other what they need, through files in one folder every shard sees
//! (a shared volume across hosts; docs/scale.md).
//!
//! Four moves, each a file that is written whole or not at all ([`servelab_plan::write_file`])
//! and stamped with the instant that names the run, so a file an earlier run left in the folder
//! never counts:
//!
//! | move | file | who |
//! |---|---|---|
//! | a shard **arrives** | `STEM-shard-K-of-N.here` | each shard but the coordinator ([`Exchange::arrive`], [`Exchange::arrivals`]) |
//! | the coordinator **publishes** | `NAME` (JSON) | shard 0 ([`Exchange::publish`], [`Exchange::wait_for`]) |
//! | a shard **ends** | `STEM-shard-K-of-N.end`: the instant, or why it failed | every shard ([`Exchange::end`], [`Exchange::wait_for_ends`]) |
//! | a part is **stopped** | — | a shard whose peer failed ([`Exchange::peer_failure`], [`cancellable`]) |
//!
//! Every wait for the others is bounded and ends at once on Ctrl-C (the interrupt every caller
//! passes); [`Exchange::peer_failure`] only races a part that is still running.
//! [`ShardedRuns`] is the [`servelab_plan::Runner`] built on them: each run one sharded run of
//! all N shards, merged exactly on every shard, as the sharded sweep and the sharded lab use it.
//! A sharded `bench` exchanges nothing while it runs: its parts are its result files, written
//! through the same whole-file write and merged afterwards (`runs merge`).

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod cancel;
mod exchange;
mod runs;

pub use cancel::{cancellable, Cancel};
pub use exchange::{End, Exchange, ExchangeError};
pub use runs::{ReadPart, ShardedRuns};
