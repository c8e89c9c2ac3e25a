//! The limit-order trading system of seed 003, built on troupe.
