//! Timers: a hierarchical hashed timing wheel and the thread that drives it.
