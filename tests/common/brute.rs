//! The brute-force registration-order proof the permutation tests share.

use cordis::host::permute::{PermuteReport, ProofOptions, permute, tool_entries};
use cordis::host::plan::LoadPlan;

/// Every order (or `max` seeded shuffles of `seed`) of `plan`'s tool-registering entries.
pub fn brute(plan: &LoadPlan, max: u64, seed: u64, threads: usize) -> PermuteReport {
    let options = ProofOptions { max, seed, threads };
    permute(plan, &tool_entries(plan), &options, &|_| {}).unwrap()
}
