//! Colours and the order contenders are shown in: fixed, so a contender looks the same in
//! every chart and every report (troupe always the same strong red).

use std::collections::BTreeMap;

/// A colour, red, green, blue.
pub(super) type Rgb = (u8, u8, u8);

/// troupe's own colour.
pub(super) const TROUPE: Rgb = (0xc1, 0x12, 0x1f);

/// The contenders the project knows, in the order they are shown, with their colours.
const KNOWN: &[(&str, Rgb)] = &[
    ("troupe", TROUPE),
    ("troupe-thread", (0xf7, 0x7f, 0x00)),
    ("troupe-bounded", (0x8f, 0x2d, 0x56)),
    ("troupe-store", TROUPE),
    ("erlang", (0x6a, 0x4c, 0x93)),
    ("go-chan", (0x00, 0x9c, 0xa6)),
    ("akka", (0x4d, 0x7c, 0x0f)),
    ("pekko", (0x38, 0xa3, 0x00)),
    ("java-threads", (0x49, 0x50, 0x57)),
    ("tokio", (0x8b, 0x5e, 0x34)),
    ("actix", (0xc9, 0x97, 0x00)),
    ("ractor", (0x3a, 0x86, 0xff)),
    ("kameo", (0xe0, 0x00, 0x6e)),
    ("os-threads", (0x1d, 0x4e, 0x89)),
    ("threads", (0x1d, 0x4e, 0x89)),
    ("thread-per-request", (0x1d, 0x4e, 0x89)),
    ("direct", (0x6c, 0x75, 0x7d)),
    ("disk", (0x1d, 0x4e, 0x89)),
];

/// Colours for contenders the project does not know, handed out in name order.
const OTHERS: &[Rgb] = &[
    (0x00, 0x81, 0xa7),
    (0xb5, 0x17, 0x9e),
    (0x58, 0x81, 0x57),
    (0xbc, 0x6c, 0x25),
    (0x5e, 0x54, 0x8e),
    (0xe7, 0x6f, 0x51),
    (0x38, 0x66, 0x41),
    (0x72, 0x09, 0xb7),
    (0x27, 0x7d, 0xa1),
    (0x9c, 0x66, 0x44),
];

/// Colours for categories that are not contenders (request types), in order.
const CATEGORIES: &[Rgb] = &[
    (0x1b, 0x9e, 0x77),
    (0xd9, 0x5f, 0x02),
    (0x75, 0x70, 0xb3),
    (0xe7, 0x29, 0x8a),
    (0x66, 0xa6, 0x1e),
    (0xa6, 0x76, 0x1d),
];

/// Each contender's colour, for one page.
#[derive(Debug, Clone, Default)]
pub(super) struct Palette {
    others: BTreeMap<String, Rgb>,
}

impl Palette {
    /// The palette for a page showing `contenders` (any order, repeats allowed): unknown
    /// names get the spare colours in name order, so the same inputs give the same colours.
    pub fn new<'n>(contenders: impl IntoIterator<Item = &'n str>) -> Palette {
        let mut others: BTreeMap<String, Rgb> = contenders
            .into_iter()
            .filter(|c| !KNOWN.iter().any(|(k, _)| k == c))
            .map(|c| (c.to_owned(), (0, 0, 0)))
            .collect();
        for (i, colour) in others.values_mut().enumerate() {
            let base = OTHERS[i % OTHERS.len()];
            *colour = darken(base, 0.3 * ((i / OTHERS.len()) % 3) as f64);
        }
        Palette { others }
    }

    /// The contender's colour.
    pub fn colour(&self, contender: &str) -> Rgb {
        KNOWN
            .iter()
            .find(|(k, _)| *k == contender)
            .map(|(_, c)| *c)
            .or_else(|| self.others.get(contender).copied())
            .unwrap_or((0x55, 0x55, 0x55))
    }
}

/// Where a contender is shown: troupe first, then the contenders the project knows, then
/// the others (among themselves, in the order they first appear).
pub(super) fn rank(contender: &str) -> u64 {
    KNOWN
        .iter()
        .position(|(k, _)| *k == contender)
        .unwrap_or(KNOWN.len()) as u64
}

/// The colour of the `i`th category (request type).
pub(super) fn category(i: usize) -> Rgb {
    darken(
        CATEGORIES[i % CATEGORIES.len()],
        0.3 * ((i / CATEGORIES.len()) % 3) as f64,
    )
}

/// The colour mixed with white: `amount` 0 keeps it, 1 is white.
pub(super) fn tint(c: Rgb, amount: f64) -> Rgb {
    mix(c, (255, 255, 255), amount)
}

/// The colour mixed with black: `amount` 0 keeps it, 1 is black.
pub(super) fn darken(c: Rgb, amount: f64) -> Rgb {
    mix(c, (0, 0, 0), amount)
}

/// The shade of a bar of the `n`th series: the colour itself, then lighter, then darker.
pub(super) fn series_shade(c: Rgb, n: usize) -> Rgb {
    match n % 4 {
        0 => c,
        1 => tint(c, 0.5),
        2 => darken(c, 0.4),
        _ => tint(c, 0.75),
    }
}

fn mix(c: Rgb, with: Rgb, amount: f64) -> Rgb {
    let a = amount.clamp(0.0, 1.0);
    let channel = |x: u8, y: u8| (f64::from(x) * (1.0 - a) + f64::from(y) * a).round() as u8;
    (
        channel(c.0, with.0),
        channel(c.1, with.1),
        channel(c.2, with.2),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn troupe_keeps_its_colour_and_strangers_get_stable_ones() {
        let a = Palette::new(["zeta", "troupe", "alpha"]);
        let b = Palette::new(["alpha", "zeta", "zeta"]);
        assert_eq!(a.colour("troupe"), TROUPE);
        assert_eq!(a.colour("alpha"), b.colour("alpha"));
        assert_ne!(a.colour("alpha"), a.colour("zeta"));
        assert!(rank("troupe") < rank("erlang") && rank("erlang") < rank("zeta"));
    }

    #[test]
    fn shades_stay_in_range() {
        assert_eq!(tint((0, 0, 0), 1.0), (255, 255, 255));
        assert_eq!(darken((200, 100, 50), 0.0), (200, 100, 50));
        assert_eq!(series_shade(TROUPE, 0), TROUPE);
    }
}
