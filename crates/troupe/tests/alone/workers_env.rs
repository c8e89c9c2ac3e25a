//! `TROUPE_WORKERS` sets the default pool's size, like Go's `GOMAXPROCS`; a bad value is a
//! clear error. (Run alone: the variable is the whole process's.)

use troupe::{BuildError, System, WORKERS_ENV};

pub fn troupe_workers_sets_the_default_pool_and_is_checked() {
    std::env::set_var(WORKERS_ENV, "3");
    let system = System::builder().build().unwrap();
    assert_eq!(system.workers(), 3);
    system.shutdown();
    // The builder's own setting wins.
    let system = System::builder().workers(1).build().unwrap();
    assert_eq!(system.workers(), 1);
    system.shutdown();
    for bad in ["0", "many", "-2", ""] {
        std::env::set_var(WORKERS_ENV, bad);
        match System::builder().build() {
            Err(BuildError::Config(message)) => {
                assert!(message.contains(WORKERS_ENV), "{message}");
            }
            other => panic!("`{bad}` accepted: {other:?}"),
        }
    }
    std::env::remove_var(WORKERS_ENV);
}
