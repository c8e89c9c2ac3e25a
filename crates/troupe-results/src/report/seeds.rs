//! The figures the seed write-ups published, as they published them: measured on their
//! authors' machines years ago, never on the machine of the report. The charts draw them
//! beside the measured series (outlined, labelled "seed NNN, published") and list them in a
//! table of their own, so a reader sees at a glance how the seed's comparison comes out here.
//!
//! Only numbers a seed states are here. Seed 003 published its figures as images only, and
//! seed 001 gives some of its figures in words ("next to nothing"); those are left out
//! rather than guessed.

/// A seed's write-up: its number, what it compared, and where its figures were measured.
pub(super) struct Seed {
    pub number: &'static str,
    pub hardware: &'static str,
}

pub(super) const RING: Seed = Seed {
    number: "000",
    hardware: "its author's 2008 machine (Erlang R12B; Scala 2.7.3 on JDK 1.6)",
};

pub(super) const STORE: Seed = Seed {
    number: "001",
    hardware: "its author's 4-core machine in 2012, JMeter with 300 users per request type",
};

pub(super) const COUNTER: Seed = Seed {
    number: "002",
    hardware: "its author's 8-core machine (8 producers), .NET and the JVM",
};

pub(super) const TRADING: Seed = Seed {
    number: "003",
    hardware: "an 8-core dual Xeon 5500 at 2.26 GHz in 2010; published as images only, so no \
               figure of it is drawn",
};

pub(super) const CHAIN: Seed = Seed {
    number: "004",
    hardware: "an AMD FX-7500 quad-core at up to 3.3 GHz in 2016",
};

impl Seed {
    /// The legend label of one of the seed's series: `Erlang R12B · seed 000, published`.
    pub fn label(&self, who: &str) -> String {
        format!("{who} · seed {}, published", self.number)
    }

    /// The note under a chart that draws the seed's figures.
    pub fn note(&self) -> String {
        format!(
            "Outlined bars and dashed lines labelled “seed {}, published” are the seed's own \
             figures, measured on {}: not on this machine, so they show the seed's comparison, \
             not a result of this run.",
            self.number, self.hardware
        )
    }
}

/// Seed 000: milliseconds to construct (spawn and link) a ring of N actors.
pub(super) const RING_SPAWN_MS: &[(&str, u64, f64)] = &[
    ("Erlang R12B", 100, 0.2),
    ("Erlang R12B", 20_000, 120.0),
    ("Scala 2.7.3 actors", 100, 10.0),
    ("Scala 2.7.3 actors", 20_000, 315.0),
];

/// Seed 000: messages per second of the 100-actor ring, 100 million messages (1 M rounds):
/// 77,354 ms for Erlang, 121,712 ms for Scala 2.7.3 on JDK 1.6.
pub(super) const RING_RATE: &[(&str, u64, f64)] = &[
    ("Erlang R12B", 100, 100e6 / 77.354),
    ("Scala 2.7.3 actors", 100, 100e6 / 121.712),
];

/// Seed 001: (store, phase, request, metric, value); latencies in ms, throughput in req/s.
/// Phases are named as `troupe-store` names them (`healthy`, `search_hangs`). The Java store
/// is servlets on Tomcat (200 threads), the Scala one Play on Netty.
pub(super) const STORE_FIGURES: &[(&str, &str, &str, &str, f64)] = &[
    ("Java/Tomcat", "healthy", "search", "p50", 77.0),
    ("Java/Tomcat", "healthy", "payment", "p50", 77.0),
    ("Java/Tomcat", "healthy", "search", "p90", 116.0),
    ("Java/Tomcat", "healthy", "payment", "p90", 116.0),
    ("Java/Tomcat", "healthy", "index", "throughput", 290.0),
    ("Java/Tomcat", "healthy", "search", "throughput", 270.0),
    ("Java/Tomcat", "healthy", "payment", "throughput", 270.0),
    ("Java/Tomcat", "search_hangs", "payment", "p90", 20_000.0),
    ("Java/Tomcat", "search_hangs", "index", "throughput", 30.0),
    ("Java/Tomcat", "search_hangs", "search", "throughput", 30.0),
    ("Java/Tomcat", "search_hangs", "payment", "throughput", 30.0),
    ("Scala/Play", "healthy", "search", "p50", 77.0),
    ("Scala/Play", "healthy", "payment", "p50", 77.0),
    ("Scala/Play", "healthy", "search", "p90", 116.0),
    ("Scala/Play", "healthy", "payment", "p90", 116.0),
    ("Scala/Play", "healthy", "index", "throughput", 290.0),
    ("Scala/Play", "healthy", "search", "throughput", 270.0),
    ("Scala/Play", "healthy", "payment", "throughput", 270.0),
    ("Scala/Play", "search_hangs", "search", "p50", 30_000.0),
    ("Scala/Play", "search_hangs", "payment", "p50", 77.0),
    ("Scala/Play", "search_hangs", "payment", "p90", 116.0),
    ("Scala/Play", "search_hangs", "index", "throughput", 290.0),
    ("Scala/Play", "search_hangs", "payment", "throughput", 270.0),
];

/// Seed 002: messages per second against messages per producer, 8 producers.
pub(super) const COUNTER_RATE: &[(&str, &[(u64, f64)])] = &[
    (
        "F# Hopac",
        &[
            (300, 75_259.0),
            (3_000, 4_393_351.0),
            (30_000, 4_591_289.0),
            (300_000, 4_620_537.0),
            (3_000_000, 4_721_725.0),
        ],
    ),
    (
        "F# MailboxProcessor",
        &[
            (300, 224_431.0),
            (3_000, 1_480_677.0),
            (30_000, 1_138_195.0),
            (300_000, 1_074_774.0),
            (3_000_000, 1_159_185.0),
        ],
    ),
    (
        "Kotlin actor",
        &[
            (300, 60_000.0),
            (3_000, 470_588.0),
            (30_000, 1_012_658.0),
            (300_000, 1_355_167.0),
            (3_000_000, 1_316_222.0),
        ],
    ),
    (
        "Kotlin select",
        &[
            (300, 26_966.0),
            (3_000, 156_863.0),
            (30_000, 342_857.0),
            (300_000, 776_950.0),
            (3_000_000, 763_310.0),
        ],
    ),
];

/// Seed 004: milliseconds for N messages through a chain of N stages.
pub(super) const CHAIN_MS: &[(&str, &[(u64, f64)])] = &[
    (
        "Java threads",
        &[
            (10, 9.0),
            (100, 85.0),
            (1_000, 5_390.0),
            (10_000, 529_856.0),
        ],
    ),
    (
        "Akka actors",
        &[
            (10, 34.0),
            (100, 220.0),
            (1_000, 2_470.0),
            (10_000, 37_988.0),
        ],
    ),
];

/// Colours of the published series: muted, apart from every runtime's.
pub(super) const COLOURS: &[(u8, u8, u8)] = &[
    (0x7a, 0x7a, 0x7a),
    (0xa0, 0x6b, 0x2d),
    (0x4a, 0x6f, 0x8a),
    (0x8a, 0x5a, 0x83),
];

/// The colour of the `i`th published series of a chart.
pub(super) fn colour(i: usize) -> (u8, u8, u8) {
    COLOURS[i % COLOURS.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_rates_are_the_seeds_elapsed_times() {
        // 100 M messages in 77,354 ms is about 1.29 M messages a second.
        assert!((RING_RATE[0].2 - 1_292_758.0).abs() < 1.0);
        assert!(RING_SPAWN_MS.iter().all(|(_, n, ms)| *n > 0 && *ms > 0.0));
    }

    #[test]
    fn published_labels_say_whose_figure_it_is() {
        assert_eq!(
            RING.label("Erlang R12B"),
            "Erlang R12B · seed 000, published"
        );
        assert!(CHAIN.note().contains("not on this machine"));
    }
}
