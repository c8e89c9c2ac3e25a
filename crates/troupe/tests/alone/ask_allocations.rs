//! Steady-state asks allocate nothing: the reply slot is recycled and a `pipe_to` callback is
//! stored inline. A counting global allocator watches a hundred thousand asks each way: from a
//! plain thread (`wait`), from a tokio task (`.await`, current-thread runtime), and from one
//! actor to another (`pipe_to`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use troupe::{Actor, Addr, AskError, Context, Handler, Message, System};

use crate::counting_alloc::allocations;

const WARM_UP: u64 = 10_000;
const MEASURED: u64 = 100_000;
/// Workers of the system under test.
const WORKERS: usize = 2;
/// Free slots a thread's shelf keeps per reply type (`Shelved::LOCAL` of `reply/slot.rs`'s
/// `FreeSlot`, in `shelf.rs`).
const SHELF: usize = 32;
/// What a thread's first shelf costs: its list of shelves, the shelf's box, its buffer.
const SHELF_SETUP: usize = 3;
/// What the process-wide spare shelf of a reply type costs when it is first used: its box
/// and its buffer.
const SPARE_SETUP: usize = 2;
/// Allocations allowed over two measured runs of each kind, whatever their length: none may
/// come per ask. A slot goes back to the cache of the thread that lets go of it last, which is
/// often the replier's worker; a worker's shelf passes half of itself to the shared spare shelf
/// (where the asker takes from) only once full, so up to a shelf per worker may sit there. The
/// asker allocates only when its own shelf and the spare shelf are empty: every slot it ever
/// made is then on a worker's shelf or in the hands of the ask before it. So the process makes
/// at most `WORKERS * SHELF + 2` slots in all, whichever window they fall in. A worker that
/// first lets go of a slot in a measured window (the warm-up's turns may all have run on the
/// other worker, or on the asking thread) sets up its shelf there, and the spare shelf may be
/// set up there too (the awaited asks measured 65 + 4 and 63 + 7 in 2 runs of 30, over the
/// bound without the setups).
const ALLOWED: usize = WORKERS * (SHELF + SHELF_SETUP) + SPARE_SETUP + 2;

struct Echo;
impl Actor for Echo {}

struct Plus(u64);
impl Message for Plus {
    type Reply = u64;
}
impl Handler<Plus> for Echo {
    fn handle(&mut self, msg: Plus, _: &mut Context<Self>) -> u64 {
        msg.0 + 1
    }
}

/// Runs `asks` twice (`MEASURED` asks each time) and returns the allocations they made.
fn allocations_of(what: &str, mut asks: impl FnMut()) -> usize {
    let mut total = 0;
    for run in 1..=2 {
        let before = allocations();
        asks();
        let made = allocations() - before;
        eprintln!("{what}, run {run}: {made} allocations for {MEASURED} asks");
        total += made;
    }
    total
}

fn from_thread(echo: &Addr<Echo>, n: u64) {
    let mut last = 0;
    for _ in 0..n {
        last = echo.ask(Plus(last)).wait().unwrap();
    }
    assert_eq!(last, n);
}

async fn from_task(echo: &Addr<Echo>, n: u64) {
    let mut last = 0;
    for _ in 0..n {
        last = echo.ask(Plus(last)).await.unwrap();
    }
    assert_eq!(last, n);
}

/// Asks `echo` again each time the previous reply is piped back to it.
struct Asker {
    echo: Addr<Echo>,
    left: u64,
    last: u64,
}
impl Actor for Asker {}

struct Go(u64);
impl Message for Go {
    type Reply = ();
}
impl Handler<Go> for Asker {
    fn handle(&mut self, msg: Go, ctx: &mut Context<Self>) {
        self.left = msg.0;
        self.last = 0;
        DONE.store(false, Ordering::Release);
        self.echo.ask(Plus(0)).pipe_to(&ctx.myself(), Replied);
    }
}

struct Replied(Result<u64, AskError>);
impl Message for Replied {
    type Reply = ();
}
impl Handler<Replied> for Asker {
    fn handle(&mut self, msg: Replied, ctx: &mut Context<Self>) {
        self.last = msg.0.unwrap();
        self.left -= 1;
        if self.left == 0 {
            LAST.store(self.last, Ordering::Relaxed);
            DONE.store(true, Ordering::Release);
        } else {
            self.echo
                .ask(Plus(self.last))
                .pipe_to(&ctx.myself(), Replied);
        }
    }
}

static DONE: AtomicBool = AtomicBool::new(false);
static LAST: AtomicU64 = AtomicU64::new(0);

fn from_actor(asker: &Addr<Asker>, n: u64) {
    DONE.store(false, Ordering::Release);
    asker.tell(Go(n)).unwrap();
    let start = Instant::now();
    while !DONE.load(Ordering::Acquire) {
        assert!(start.elapsed() < Duration::from_secs(120), "asks stalled");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(LAST.load(Ordering::Relaxed), n);
}

pub fn steady_state_asks_do_not_allocate() {
    let system = System::builder().workers(WORKERS).build().unwrap();
    let echo = system.spawn(Echo);
    crate::until_other_threads_sleep();

    from_thread(&echo, WARM_UP);
    let made = allocations_of("thread -> actor, wait", || from_thread(&echo, MEASURED));
    assert!(
        made <= ALLOWED,
        "{made} allocations for 2 x {MEASURED} asks with wait"
    );

    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    tokio.block_on(from_task(&echo, WARM_UP));
    let made = allocations_of("tokio task -> actor, .await", || {
        tokio.block_on(from_task(&echo, MEASURED))
    });
    assert!(
        made <= ALLOWED,
        "{made} allocations for 2 x {MEASURED} asks awaited"
    );

    let asker = system.spawn(Asker {
        echo: echo.clone(),
        left: 0,
        last: 0,
    });
    from_actor(&asker, WARM_UP);
    let made = allocations_of("actor -> actor, pipe_to", || from_actor(&asker, MEASURED));
    assert!(
        made <= ALLOWED,
        "{made} allocations for 2 x {MEASURED} asks piped"
    );

    drop(tokio);
    system.shutdown();
}
