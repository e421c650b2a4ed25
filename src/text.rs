//! How node bytes become text, one way for everything shown: a path ([`display_path`],
//! which gives its bytes back through [`path_bytes`]), with the secret material found in
//! names withheld from it ([`withhold`]), and any text made safe for a terminal or a
//! one-line message ([`terminal_safe`]). The lowest layer: the scan, the sites, the walk,
//! `sys::tree`'s errors, `clean`, `cri` and the report writers all show paths and names
//! through it.

pub mod withhold;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// A path as text, the one way node paths become text: UTF-8 where it is valid, each
/// invalid byte as `\xNN` and a backslash as `\\` (so the text gives the bytes back:
/// [`path_bytes`]), and each component holding secret material found in a name as
/// [`withhold::WITHHELD`] (see [`withhold`]).
pub fn display_path(p: &OsStr) -> String {
    shown_with(p, withhold::is_withheld)
}

/// The path a finding's id is made of: [`display_path`]'s text, with only the names found
/// to hold material themselves withheld ([`withhold::held_by`]). What other names were
/// found when the finding was made (a matter of which thread came first) does not change
/// it; the path the report shows withholds them too.
pub fn id_path(p: &OsStr) -> String {
    shown_with(p, withhold::held_by)
}

/// `p` as text, each component for which `withheld` says so withheld.
fn shown_with(p: &OsStr, withheld: fn(&[u8]) -> bool) -> String {
    let bytes = p.as_encoded_bytes();
    let mut out = String::with_capacity(bytes.len());
    for (i, name) in bytes.split(|&b| b == b'/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if withheld(name) {
            out.push_str(withhold::WITHHELD);
            continue;
        }
        for chunk in name.utf8_chunks() {
            for part in chunk.valid().split_inclusive('\\') {
                out.push_str(part);
                if part.ends_with('\\') {
                    out.push('\\');
                }
            }
            for b in chunk.invalid() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    out
}

/// The bytes a [`display_path`] text stands for: `\xNN` and `\\` undone (a withheld
/// component stays [`withhold::WITHHELD`]).
pub fn path_bytes(shown: &str) -> Vec<u8> {
    let b = shown.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |at: usize| b.get(at).and_then(|&c| (c as char).to_digit(16));
        match (b[i], b.get(i + 1)) {
            (b'\\', Some(b'\\')) => {
                out.push(b'\\');
                i += 2;
            }
            (b'\\', Some(b'x')) if hex(i + 2).is_some() && hex(i + 3).is_some() => {
                out.push((hex(i + 2).unwrap_or(0) * 16 + hex(i + 3).unwrap_or(0)) as u8);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// A [`display_path`] text made again: components found since to hold secret material are
/// withheld (for paths made into text before the names were matched, by the walk).
pub fn redisplay(shown: &str) -> String {
    display_path(OsStr::from_bytes(&path_bytes(shown)))
}

/// Characters that act on a terminal or hide instead of showing: controls (Cc), format
/// characters (Cf: bidi marks and overrides, zero-width characters, the soft hyphen,
/// Unicode tags), line and paragraph separators (Zl, Zp), and the rest of the tag and
/// invisible-operator blocks (unassigned there).
static HOSTILE: std::sync::LazyLock<regex_automata::meta::Regex> = std::sync::LazyLock::new(|| {
    regex_automata::meta::Regex::new(
        r"[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\x{2060}-\x{206F}\x{E0000}-\x{E007F}]",
    )
    .expect("a valid character class")
});

/// Text made safe for a terminal or a one-line message: every character of `HOSTILE`
/// (controls, format characters, line and paragraph separators) is shown as an escape
/// (`\u{202e}`) instead of acting on the display.
pub fn terminal_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for m in HOSTILE.find_iter(s) {
        out.push_str(&s[last..m.start()]);
        for c in s[m.range()].chars() {
            out.extend(c.escape_default());
        }
        last = m.end();
    }
    out.push_str(&s[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn paths_and_terminal_escaping() {
        assert_eq!(display_path(OsStr::from_bytes(b"/a/\xffb\xc3")), "/a/\\xffb\\xc3");
        assert_eq!(display_path(OsStr::from_bytes(b"/a\\xff/b\\")), "/a\\\\xff/b\\\\");
        assert_eq!(terminal_safe("a\nb\x1b[31m\u{202e}c"), "a\\nb\\u{1b}[31m\\u{202e}c");
        assert_eq!(terminal_safe("/var/lib/kubelet/ünï"), "/var/lib/kubelet/ünï");
        for c in [
            '\u{2028}',
            '\u{2029}',
            '\u{ad}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{200b}',
            '\u{2065}',
            '\u{feff}',
            '\u{61c}',
            '\u{85}',
            '\u{fff9}',
        ] {
            let shown = terminal_safe(&format!("a{c}b"));
            assert!(!shown.contains(c), "U+{:04X}: {shown}", c as u32);
            assert!(shown.starts_with('a') && shown.ends_with('b'), "{shown}");
        }
    }

    #[test]
    fn display_paths_give_their_bytes_back() {
        for raw in [&b"/a/\xffb\xc3"[..], b"/x\\xff/\\\\/\\", b"/\xe2\x80/\\x4", b"", b"/"] {
            let shown = display_path(OsStr::from_bytes(raw));
            assert_eq!(path_bytes(&shown), raw, "{shown}");
            assert_eq!(redisplay(&shown), shown);
        }
    }

    #[test]
    fn withheld_components_are_not_shown() {
        // Material no other test uses: the record lasts for the process.
        let material = b"q7Zr-withheld-in-a-unit-test-0x5e";
        let path = [&b"/var/log/pods/ns_"[..], material, b"_uid/app/0.log"].concat();
        let before = display_path(OsStr::from_bytes(&path));
        assert!(before.contains("q7Zr"));
        withhold::withhold(material);
        let after = display_path(OsStr::from_bytes(&path));
        assert_eq!(after, "/var/log/pods/<withheld>/app/0.log");
        assert_eq!(redisplay(&before), after);
        assert_eq!(withhold::shown(std::str::from_utf8(material).unwrap()), withhold::WITHHELD);
        assert_eq!(withhold::shown("app"), "app");
        // Names in place, and the words of a message that hold it.
        let material = std::str::from_utf8(material).unwrap();
        let mut names = [format!("web-{material}"), "app".into()];
        withhold::names(names.iter_mut());
        assert_eq!(names, [withhold::WITHHELD, "app"]);
        let mut message = format!("remove it: docker rm x{material}y (or not)");
        withhold::prose(&mut message);
        assert_eq!(message, "remove it: docker rm <withheld> (or not)");
        let mut id = format!("rm {material}");
        withhold::prose(&mut id);
        assert_eq!(id, "rm <withheld>");
    }
}
