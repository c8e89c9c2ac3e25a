//! The console over loopback: its JSON endpoints as a client sees them (bad input included),
//! and the page as a reader sees it in headless Chromium.

mod browser;
mod common;
mod http;
