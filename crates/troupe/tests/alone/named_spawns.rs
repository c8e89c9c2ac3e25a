//! A named actor gives its name back: spawning and stopping named actors over and over leaves
//! the process's live bytes where they were. (Each named spawn used to keep a copy of its
//! name for ever: the reservation that held it was forgotten once filled.)

use std::time::{Duration, Instant};

use troupe::{Actor, SpawnOptions, System};

use crate::counting_alloc::live_bytes;

struct Named;
impl Actor for Named {}

/// Actors spawned and stopped in each round.
const ACTORS: usize = 1_000;
/// Bytes in each name: long enough that a copy kept per spawn stands out.
const NAME_BYTES: usize = 200;

fn name(i: usize) -> String {
    format!("{i:0>NAME_BYTES$}")
}

/// Spawns `ACTORS` named actors, stops each, and waits until every name is free again and
/// every actor is gone.
fn spawn_and_stop(system: &System) {
    for i in 0..ACTORS {
        let addr = system
            .spawn_named(&name(i), SpawnOptions::new(), || Named)
            .unwrap();
        addr.stop();
    }
    let start = Instant::now();
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(60), "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    for i in 0..ACTORS {
        wait("a stopped actor's name is still taken", &|| {
            system.lookup::<Named>(&name(i)).is_none()
        });
    }
    wait("stopped actors are still alive", &|| {
        system.live_actors() == 0
    });
}

pub fn named_spawns_give_their_names_back() {
    let system = System::builder().workers(2).build().unwrap();
    crate::until_other_threads_sleep();
    // Warm-up: the registry's map and the workers' caches reach their size.
    spawn_and_stop(&system);
    // Three measured rounds: frees that come late (a crossbeam-epoch collection, a cache
    // that gives back later) may leave a few kilobytes in one round (29 KB once, under
    // AddressSanitizer), but a name kept per spawn keeps ACTORS * NAME_BYTES (200,000 bytes)
    // in every round.
    let kept: Vec<isize> = (0..3)
        .map(|_| {
            let before = live_bytes();
            spawn_and_stop(&system);
            live_bytes() - before
        })
        .collect();
    eprintln!("{kept:?} bytes kept by rounds of {ACTORS} named spawns and stops");
    let allowed = (ACTORS * NAME_BYTES / 4) as isize;
    let least = *kept.iter().min().expect("three rounds");
    assert!(
        least < allowed,
        "{kept:?} bytes kept by rounds of {ACTORS} named spawns and stops (allowed {allowed})"
    );
    system.shutdown();
}
