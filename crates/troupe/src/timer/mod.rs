//! Timers: a hierarchical hashed timing wheel and the thread that drives it.
//! (Interim implementation: a heap behind a mutex; replaced by the wheel.)

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Identifies a scheduled timer, to cancel it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId(u64);

enum Action {
    Once(Box<dyn FnOnce() + Send>),
    Repeat(Box<dyn FnMut() -> bool + Send>, Duration),
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    actions: std::collections::HashMap<u64, Action>,
    cancelled: HashSet<u64>,
    next: u64,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

/// Cloneable handle.
#[derive(Clone)]
pub(crate) struct TimerHandle(Arc<Shared>);

pub(crate) struct TimerService {
    handle: TimerHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TimerService {
    pub(crate) fn start(name: &str) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            cv: Condvar::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-timer"))
            .spawn(move || loop {
                let mut st = s.state.lock().unwrap();
                if st.stop {
                    return;
                }
                let now = Instant::now();
                match st.heap.peek().copied() {
                    Some(Reverse((at, id))) if at <= now => {
                        st.heap.pop();
                        if let Some(action) = st.actions.remove(&id) {
                            drop(st);
                            match action {
                                Action::Once(f) => {
                                    let _ =
                                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
                                }
                                Action::Repeat(mut f, every) => {
                                    let again = std::panic::catch_unwind(
                                        std::panic::AssertUnwindSafe(|| f()),
                                    )
                                    .unwrap_or(false);
                                    if again {
                                        let mut st = s.state.lock().unwrap();
                                        if !st.cancelled.remove(&id) {
                                            st.heap.push(Reverse((at + every, id)));
                                            st.actions.insert(id, Action::Repeat(f, every));
                                        }
                                    }
                                }
                            }
                        }
                    }
                    Some(Reverse((at, _))) => {
                        drop(s.cv.wait_timeout(st, at - now).unwrap());
                    }
                    None => {
                        drop(s.cv.wait(st).unwrap());
                    }
                }
            })?;
        Ok(Self {
            handle: TimerHandle(shared),
            thread: Some(thread),
        })
    }
    pub(crate) fn handle(&self) -> TimerHandle {
        self.handle.clone()
    }
    pub(crate) fn shutdown(mut self) {
        self.stop();
    }
    fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            let mut st = self.handle.0.state.lock().unwrap();
            st.stop = true;
            st.actions.clear();
            drop(st);
            self.handle.0.cv.notify_all();
            let _ = t.join();
        }
    }
}
impl Drop for TimerService {
    fn drop(&mut self) {
        self.stop();
    }
}

impl TimerHandle {
    fn add(&self, at: Instant, action: Action) -> TimerId {
        let mut st = self.0.state.lock().unwrap();
        st.next += 1;
        let id = st.next;
        st.heap.push(Reverse((at, id)));
        st.actions.insert(id, action);
        drop(st);
        self.0.cv.notify_all();
        TimerId(id)
    }
    pub(crate) fn schedule(&self, delay: Duration, action: Box<dyn FnOnce() + Send>) -> TimerId {
        self.add(Instant::now() + delay, Action::Once(action))
    }
    pub(crate) fn schedule_repeating(
        &self,
        first: Duration,
        every: Duration,
        action: Box<dyn FnMut() -> bool + Send>,
    ) -> TimerId {
        self.add(Instant::now() + first, Action::Repeat(action, every))
    }
    pub(crate) fn cancel(&self, id: TimerId) -> bool {
        let mut st = self.0.state.lock().unwrap();
        let removed = st.actions.remove(&id.0).is_some();
        if !removed {
            st.cancelled.insert(id.0);
        }
        removed
    }
}
