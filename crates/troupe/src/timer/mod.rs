//! Timers: a hierarchical hashed timing wheel and the thread that drives it.
//!
//! - [`wheel`]: [`wheel::Wheel`], a timing wheel over integer ticks (Varghese and Lauck's
//!   hierarchical scheme, as in tokio's `runtime/time` driver): O(1) insert and cancel, entries
//!   in a slab linked into slot lists by index, no allocation per timer once the slab has grown.
//! - [`driver`]: [`TimerService`], one thread named `<name>-timer` that sleeps until the wheel's
//!   next deadline and runs due actions, and [`TimerHandle`], a cloneable handle for scheduling
//!   and cancelling from any thread. Actions are short closures (in troupe, they send a
//!   message); they run on the driver thread, outside its lock.
//!
//! Ticks are milliseconds of the monotonic clock; a timer never fires before its delay has
//! passed. A simulated system (`sim/`) gives the service its own clock and no thread: the
//! simulation moves the clock and fires what is due itself (`TimerService::simulated`).

mod driver;
mod wheel;

pub use driver::TimerId;
pub(crate) use driver::{DueTimer, SimulatedClock, TimerHandle, TimerService};
