//! Rayon thread pools for the batch calls, one per requested size (`jobs`; 0 = every core),
//! built once and shared by every module and every batch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

pub fn pool(jobs: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(pool) = pools.get(&jobs) {
        return Ok(pool.clone());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let pool = Arc::new(pool);
    pools.insert(jobs, pool.clone());
    Ok(pool)
}

/// Frees `value` on a pool thread. Dropping a structure of tens of thousands of buffers
/// takes milliseconds (and the allocator's consolidation after it), which the caller, on
/// Python's thread, need not wait for.
pub fn drop_later<T: Send + 'static>(value: T) {
    match pool(0) {
        Ok(pool) => pool.spawn(move || drop(value)),
        Err(_) => drop(value),
    }
}
