//! What a user writes: the [`Actor`], [`Message`] and [`Handler`] traits, and the [`Context`]
//! a handler gets.
//!
//! An actor owns its state and handles one message at a time (`&mut self`), so it needs no
//! locks. It accepts every message type `M` for which it implements `Handler<M>`; sending it
//! anything else does not compile.

use std::ptr::NonNull;
use std::sync::Arc;

use crate::addr::Addr;
use crate::cell::{ActorCell, ChildRef};
use crate::system::{Placement, SystemShared};

/// An actor: state plus behaviour, driven by messages.
///
/// The lifecycle hooks run on the actor's own turn, like handlers:
/// `started` before the first message; `stopping` when a stop begins (children are still
/// running; messages still in the mailbox are dropped and their askers get
/// [`AskError::Stopped`](crate::AskError::Stopped)); `stopped` after every child has stopped,
/// just before the actor's state is dropped.
///
/// ```
/// use troupe::{Actor, Context, Handler, Message, System};
///
/// struct Greeter { greeted: u32 }
/// impl Actor for Greeter {}
///
/// struct Greet(&'static str);
/// impl Message for Greet { type Reply = String; }
///
/// impl Handler<Greet> for Greeter {
///     fn handle(&mut self, msg: Greet, _ctx: &mut Context<Self>) -> String {
///         self.greeted += 1;
///         format!("hello {} (#{})", msg.0, self.greeted)
///     }
/// }
///
/// let system = System::new();
/// let greeter = system.spawn(Greeter { greeted: 0 });
/// assert_eq!(greeter.ask(Greet("ada")).wait().unwrap(), "hello ada (#1)");
/// system.shutdown();
/// ```
pub trait Actor: Sized + Send + 'static {
    /// Runs once, before the first message is handled.
    fn started(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs once when the actor begins to stop (by [`Context::stop`], [`Addr::stop`], its
    /// parent stopping, or system shutdown).
    fn stopping(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs once after all children have stopped; the actor is dropped right after.
    fn stopped(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }
}

/// A message type, and the type of its reply (`()` for messages that are only told).
///
/// ```
/// struct Add(u64);
/// impl troupe::Message for Add { type Reply = (); }
/// ```
pub trait Message: Send + 'static {
    /// What a handler returns for this message; delivered to the asker by `ask`.
    type Reply: Send + 'static;
}

/// An actor's behaviour for message type `M`.
///
/// ```compile_fail
/// use troupe::{Actor, Context, Handler, Message, System};
/// struct Counter(u64);
/// impl Actor for Counter {}
/// struct Add(u64);
/// impl Message for Add { type Reply = (); }
/// struct Unrelated;
/// impl Message for Unrelated { type Reply = (); }
/// impl Handler<Add> for Counter {
///     fn handle(&mut self, msg: Add, _: &mut Context<Self>) { self.0 += msg.0 }
/// }
/// let system = System::new();
/// let counter = system.spawn(Counter(0));
/// counter.tell(Unrelated); // Counter does not handle `Unrelated`: does not compile
/// ```
pub trait Handler<M: Message>: Actor {
    /// Handles one message. The return value is the reply to an `ask` (ignored for `tell`).
    fn handle(&mut self, msg: M, ctx: &mut Context<Self>) -> M::Reply;
}

/// The actor's view of itself and the runtime during a turn: its own address, stopping,
/// spawning children.
pub struct Context<A: Actor> {
    /// The cell this context belongs to; set when the first turn begins.
    pub(crate) cell: Option<NonNull<ActorCell<A>>>,
    pub(crate) system: Arc<SystemShared>,
    pub(crate) children: Option<Box<slab::Slab<ChildRef>>>,
    pub(crate) stop_requested: bool,
}

// SAFETY: the context lives inside its actor's cell and is touched only by the actor's current
// turn; the raw cell pointer is to that same (Sync) cell.
unsafe impl<A: Actor> Send for Context<A> {}

impl<A: Actor> Context<A> {
    pub(crate) fn new(system: Arc<SystemShared>) -> Self {
        Self {
            cell: None,
            system,
            children: None,
            stop_requested: false,
        }
    }

    /// This actor's own address, to give to others or keep.
    pub fn myself(&self) -> Addr<A> {
        let cell = self
            .cell
            .expect("a context is used only inside its actor's turns");
        // SAFETY: `cell` came from `Arc::into_raw` (the cell's "alive" reference, held until the
        // actor's last turn ends) and this runs inside a turn, so the allocation is live.
        unsafe { Addr::from_cell_ptr(cell) }
    }

    /// Stops this actor after the current message: no further messages are handled.
    pub fn stop(&mut self) {
        self.stop_requested = true;
    }

    /// Spawns a child on this actor's scheduler pool. Children are stopped before their parent
    /// finishes stopping.
    pub fn spawn<B: Actor>(&mut self, actor: B) -> Addr<B> {
        self.spawn_on(actor, Placement::Pool)
    }

    /// Spawns a child with an explicit placement (e.g. [`Placement::Thread`]).
    pub fn spawn_on<B: Actor>(&mut self, actor: B, placement: Placement) -> Addr<B> {
        let parent = self.myself().into_child_parent();
        let children = self
            .children
            .get_or_insert_with(|| Box::new(slab::Slab::new()));
        let entry = children.vacant_entry();
        let key = entry.key();
        let cell = crate::system::new_cell(
            &self.system,
            actor,
            placement,
            crate::cell::ParentLink::Actor { parent, key },
        );
        entry.insert(cell.clone());
        crate::system::start(&self.system, &cell);
        Addr::from_cell(cell)
    }

    /// Number of children currently alive (not yet reported stopped).
    pub fn children_count(&self) -> usize {
        self.children.as_ref().map_or(0, |c| c.len())
    }
}
