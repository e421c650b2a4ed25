//! Tables for a person at a terminal: the columns fitted to the terminal's width so that
//! no line wraps (cells cut with `…`, the least needed columns left out first), prose
//! wrapped at word boundaries, and colour only where the reader is a terminal. Widths
//! are display widths (a CJK character takes two columns). Every cell given here is
//! already [`crate::text::terminal_safe`].

use std::collections::BTreeMap;
use unicode_width::UnicodeWidthStr;

/// The width a table is fitted to when stdout is no terminal and `COLUMNS` names none.
pub const DEFAULT_WIDTH: usize = 120;

/// The narrowest width fitted to: a narrower terminal gets lines this long.
const MIN_WIDTH: usize = 40;

/// How a table is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// The width lines are fitted to; `None` with `--wide` (nothing shortened or cut).
    pub width: Option<usize>,
    /// Colour (SGR sequences) on: a terminal, without `NO_COLOR`, or `--color always`.
    pub color: bool,
}

impl View {
    /// What `--wide` and `--color` (`Some(true)` always, `Some(false)` never, `None`
    /// auto) ask for, for output going to a terminal of `term_width` columns, or (`None`)
    /// elsewhere: the terminal's width, else `COLUMNS`, else [`DEFAULT_WIDTH`]; colour by
    /// default on a terminal only, and never with `NO_COLOR` set or `TERM=dumb`.
    pub fn new(
        wide: bool,
        color: Option<bool>,
        term_width: Option<usize>,
        env: impl Fn(&str) -> Option<String>,
    ) -> View {
        let to_terminal = term_width.is_some();
        let columns = || env("COLUMNS").and_then(|c| c.trim().parse::<usize>().ok());
        let width = match term_width {
            Some(w) if w > 0 => w,
            _ => columns().filter(|&w| w > 0).unwrap_or(DEFAULT_WIDTH),
        };
        let no_color = env("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = env("TERM").is_some_and(|t| t == "dumb");
        let color = color.unwrap_or(to_terminal && !no_color && !dumb);
        View { width: (!wide).then_some(width.max(MIN_WIDTH)), color }
    }

    /// A plain view of `width` columns (tests, and writers that fit nothing).
    pub fn plain(width: usize) -> View {
        View { width: Some(width), color: false }
    }

    /// `text` in `style` when colour is on.
    pub fn paint(&self, style: Style, text: &str) -> String {
        if self.color && !text.is_empty() {
            format!("\x1b[{}m{text}\x1b[0m", style.sgr())
        } else {
            text.to_owned()
        }
    }

    /// One line cut to the width (its end replaced by `…`).
    pub fn line(&self, text: &str) -> String {
        match self.width {
            Some(w) => cut(text, w, Cut::End),
            None => text.to_owned(),
        }
    }

    /// Prose wrapped at spaces to the width, each line after the first indented by
    /// `indent` columns (a word longer than a line is cut).
    pub fn wrap(&self, text: &str, indent: usize) -> Vec<String> {
        let Some(width) = self.width else { return vec![text.to_owned()] };
        let lead = text.len() - text.trim_start_matches(' ').len();
        let mut lines = Vec::new();
        let mut line = " ".repeat(lead);
        for word in text.split(' ').filter(|w| !w.is_empty()) {
            let room = width.saturating_sub(if lines.is_empty() { 0 } else { indent });
            let started = !line.trim_start().is_empty();
            let needed = if started { line.width() + 1 } else { line.width() };
            if started && needed + word.width() > room {
                lines.push(std::mem::take(&mut line));
            }
            if !line.trim_start().is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() || lines.is_empty() {
            lines.push(line);
        }
        let pad = " ".repeat(indent);
        lines
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let l = if i == 0 { l } else { format!("{pad}{l}") };
                cut(&l, width, Cut::End)
            })
            .collect()
    }
}

/// The few styles the tables use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Headers of groups and columns.
    Bold,
    /// Critical.
    Critical,
    /// High.
    High,
    /// Medium.
    Medium,
    /// What matters less (low, info, hints).
    Dim,
}

impl Style {
    fn sgr(self) -> &'static str {
        match self {
            Style::Bold => "1",
            Style::Critical => "1;31",
            Style::High => "31",
            Style::Medium => "33",
            Style::Dim => "2",
        }
    }

    /// The style of a severity.
    pub fn of(severity: crate::finding::Severity) -> Style {
        use crate::finding::Severity;
        match severity {
            Severity::Critical => Style::Critical,
            Severity::High => Style::High,
            Severity::Medium => Style::Medium,
            Severity::Low | Severity::Info => Style::Dim,
        }
    }
}

/// Which end of a cell too wide for its column is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Keep the start (names, prose).
    End,
    /// Keep the end (paths: the file's name matters most).
    Start,
}

/// A column of a fitted table.
#[derive(Clone, Copy, Debug)]
pub struct Col {
    /// Its header.
    pub name: &'static str,
    /// The narrowest it is cut to, at [`DEFAULT_WIDTH`] columns (scaled for fewer).
    pub min: usize,
    /// Which end is cut.
    pub cut: Cut,
    /// Right-aligned (numbers).
    pub right: bool,
    /// When the table is too wide once every column is at its narrowest, the columns
    /// with a `drop` are left out, lowest first; `0` never.
    pub drop: u8,
    /// Columns are narrowed in order of `shrink`, lowest first (`0` never narrowed).
    pub shrink: u8,
}

impl Col {
    /// A column cut at its end, never left out nor narrowed.
    pub const fn fixed(name: &'static str) -> Col {
        Col { name, min: 0, cut: Cut::End, right: false, drop: 0, shrink: 0 }
    }

    /// Narrowed (`shrink`, lowest first) to no less than `min`, cut at `cut`.
    pub const fn flex(self, min: usize, cut: Cut, shrink: u8) -> Col {
        Col { min, cut, shrink, ..self }
    }

    /// Left out (lowest first) when nothing else fits.
    pub const fn droppable(self, drop: u8) -> Col {
        Col { drop, ..self }
    }

    /// Right-aligned.
    pub const fn right(self) -> Col {
        Col { right: true, ..self }
    }
}

/// The gap between columns.
const GAP: usize = 2;

/// A table's columns fitted to a width: each column's width, `None` when left out.
pub struct Fitted {
    cols: Vec<Col>,
    widths: Vec<Option<usize>>,
    indent: usize,
}

impl Fitted {
    /// Fits `cols` holding `rows` (already terminal-safe), each line indented by `indent`,
    /// to `width` (`None`: every column as wide as its widest cell).
    pub fn new(cols: &[Col], rows: &[Vec<String>], width: Option<usize>, indent: usize) -> Fitted {
        let natural: Vec<usize> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                rows.iter()
                    .map(|r| r.get(i).map_or(0, |s| s.width()))
                    .chain([c.name.width()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut widths: Vec<Option<usize>> = natural.iter().map(|&w| Some(w)).collect();
        if let Some(width) = width {
            let total = |ws: &[Option<usize>]| {
                let shown: Vec<usize> = ws.iter().flatten().copied().collect();
                indent + shown.iter().sum::<usize>() + GAP * shown.len().saturating_sub(1)
            };
            let mut order: Vec<usize> = (0..cols.len()).filter(|&i| cols[i].shrink > 0).collect();
            order.sort_by_key(|&i| cols[i].shrink);
            // Narrowest widths are for [`DEFAULT_WIDTH`] columns; a narrower terminal
            // scales them down.
            let floor = |i: usize| {
                let min = cols[i].min;
                min.min(natural[i]).min((min * width).div_ceil(DEFAULT_WIDTH))
            };
            // Columns of one rank give up what is too much in proportion to what each
            // has above its narrowest.
            let narrow = |widths: &mut Vec<Option<usize>>, ranked: &[usize]| {
                for rank in ranked.chunk_by(|&a, &b| cols[a].shrink == cols[b].shrink) {
                    let over = total(widths).saturating_sub(width);
                    let shown: Vec<usize> =
                        rank.iter().copied().filter(|&i| widths[i].is_some()).collect();
                    let spare: usize = shown.iter().map(|&i| natural[i] - floor(i)).sum();
                    if over == 0 || spare == 0 {
                        continue;
                    }
                    let mut left = over.min(spare);
                    for &i in &shown {
                        let mine = natural[i] - floor(i);
                        let give = (over * mine).div_ceil(spare).min(mine).min(left);
                        left -= give;
                        widths[i] = Some(natural[i] - give);
                    }
                }
            };
            // The columns kept whatever the width are narrowed first; those that may be
            // left out are left out before they are narrowed.
            let (kept, droppable): (Vec<usize>, Vec<usize>) =
                order.iter().partition(|&&i| cols[i].drop == 0);
            narrow(&mut widths, &kept);
            let mut drops: Vec<usize> = (0..cols.len()).filter(|&i| cols[i].drop > 0).collect();
            drops.sort_by_key(|&i| cols[i].drop);
            for i in drops {
                if total(&widths) > width {
                    widths[i] = None;
                }
            }
            narrow(&mut widths, &droppable);
            // What leaving columns out freed goes back to the columns narrowed last.
            for &i in order.iter().rev() {
                let room = width.saturating_sub(total(&widths));
                if let Some(w) = widths[i].as_mut() {
                    *w = (*w + room).min(natural[i]);
                }
            }
        }
        Fitted { cols: cols.to_vec(), widths, indent }
    }

    /// The header line (its names; bold with colour).
    pub fn header(&self, view: &View) -> String {
        let names: Vec<String> = self.cols.iter().map(|c| c.name.to_owned()).collect();
        self.render(&names, view, |_, s| view.paint(Style::Bold, s))
    }

    /// One row, each cell fitted to its column; `style` paints a cell (by column index)
    /// once it is cut and padded.
    pub fn row(
        &self,
        cells: &[String],
        view: &View,
        style: impl Fn(usize, &str) -> String,
    ) -> String {
        self.render(cells, view, style)
    }

    /// A row whose first cell is a severity, painted in its colour.
    pub fn severity_row(
        &self,
        cells: &[String],
        view: &View,
        severity: crate::finding::Severity,
    ) -> String {
        let sev = Style::of(severity);
        self.render(cells, view, |i, s| if i == 0 { view.paint(sev, s) } else { s.to_owned() })
    }

    fn render(
        &self,
        cells: &[String],
        view: &View,
        style: impl Fn(usize, &str) -> String,
    ) -> String {
        let (mut plain, mut styled) = (" ".repeat(self.indent), " ".repeat(self.indent));
        let shown: Vec<usize> =
            (0..self.cols.len()).filter(|&i| self.widths[i].is_some()).collect();
        for (n, &i) in shown.iter().enumerate() {
            let (col, w) = (&self.cols[i], self.widths[i].unwrap_or(0));
            let cell = cut(cells.get(i).map_or("", String::as_str), w, col.cut);
            let pad = " ".repeat(w.saturating_sub(cell.width()));
            let last = n + 1 == shown.len();
            let (left, right) = if col.right { (pad.as_str(), "") } else { ("", pad.as_str()) };
            let right = if last { String::new() } else { format!("{right}{}", " ".repeat(GAP)) };
            plain.push_str(&format!("{left}{cell}{right}"));
            styled.push_str(&format!("{left}{}{right}", style(i, &cell)));
        }
        let (plain, styled) = (plain.trim_end(), styled.trim_end());
        // A width below the narrowest columns: the line is cut, without colour (its
        // sequences take no columns but would be cut too).
        match view.width {
            Some(w) if plain.width() > w => cut(plain, w, Cut::End),
            _ => styled.to_owned(),
        }
    }
}

/// `s` cut to at most `width` columns, the cut end replaced by `…`.
pub fn cut(s: &str, width: usize, at: Cut) -> String {
    if s.width() <= width {
        return s.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    // The most characters whose text, measured as a whole (a character and the variation
    // selector after it take more columns together than apart), fits beside the `…`.
    let chars: Vec<char> = s.chars().collect();
    let part = |n: usize| -> String {
        match at {
            Cut::End => chars[..n].iter().collect(),
            Cut::Start => chars[chars.len() - n..].iter().collect(),
        }
    };
    let (mut lo, mut hi) = (0, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if part(mid).width() < width {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut kept = part(lo);
    // Widths of a growing text need not grow one by one: shrink until it fits.
    while kept.width() >= width && !kept.is_empty() {
        lo -= 1;
        kept = part(lo);
    }
    match at {
        Cut::End => format!("{kept}…"),
        Cut::Start => format!("…{kept}"),
    }
}

/// The display width of `s`.
pub fn width(s: &str) -> usize {
    s.width()
}

/// The dir a group of paths is shown relative to: the one ending at the component that
/// names the owner (`…/pods/<uid>/`, `…/containers/<id>/`) where most of its paths have
/// one, else the dir all its paths share; empty when that is `/` alone.
pub fn owner_dir<'p>(paths: impl Iterator<Item = &'p str> + Clone, id: Option<&str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    if let Some(id) = id {
        for path in paths.clone() {
            if let Some(d) = dir_through(path, id) {
                *counts.entry(d).or_default() += 1;
            }
        }
    }
    if let Some((d, _)) = counts.iter().max_by_key(|(d, n)| (**n, std::cmp::Reverse(d.len()))) {
        return (*d).to_owned();
    }
    // The dirs all the paths share, compared name by name (never inside a character).
    let mut common: Option<Vec<&str>> = None;
    for path in paths {
        let dirs: Vec<&str> = path.split('/').collect();
        let dirs = &dirs[..dirs.len().saturating_sub(1)];
        common = Some(match common {
            None => dirs.to_vec(),
            Some(c) => c.iter().zip(dirs).take_while(|(a, b)| a == b).map(|(a, _)| *a).collect(),
        });
    }
    match common {
        // `/var/lib/x/`: at least three names deep, else no shorter than the paths.
        Some(c) if c.len() > 3 => format!("{}/", c.join("/")),
        _ => String::new(),
    }
}

/// A pod's line: its `namespace/name` when known, its uid unless `dir` (shown after the
/// line) holds it, then what is known of whether it lives (`live`).
pub fn pod_line(name: Option<String>, uid: &str, dir: &str, live: Option<&str>) -> String {
    let what = match (name, dir.contains(uid)) {
        (Some(name), true) => name,
        (Some(name), false) => format!("{name}  uid {uid}"),
        (None, true) => "(name unknown)".to_owned(),
        (None, false) => format!("uid {uid}"),
    };
    match live {
        Some(live) => format!("pod {what}  {live}"),
        None => format!("pod {what}"),
    }
}

/// Writes an owner's line and its dir ([`owner_lines`]), bold.
pub fn write_owner(
    out: &mut dyn std::io::Write,
    header: &str,
    dir: &str,
    view: &View,
) -> std::io::Result<()> {
    for line in owner_lines(header, &crate::text::terminal_safe(dir), view) {
        writeln!(out, "{}", view.paint(Style::Bold, &line))?;
    }
    Ok(())
}

/// An owner's line and its dir: on one line when both fit, else the dir on a line of its
/// own (cut at its start when even that is too long).
pub fn owner_lines(header: &str, dir: &str, view: &View) -> Vec<String> {
    let one = if dir.is_empty() { header.to_owned() } else { format!("{header}  {dir}") };
    match view.width {
        Some(_) if dir.is_empty() => vec![view.line(header)],
        Some(w) if width(&one) > w => {
            vec![view.line(header), format!("  {}", cut(dir, w - 2, Cut::Start))]
        }
        _ => vec![one],
    }
}

/// `path` up to and with the first component that holds `id`, and its `/`.
pub fn dir_through<'p>(path: &'p str, id: &str) -> Option<&'p str> {
    // A name that is the id, starts with it (`<id>-init`) or ends with `_<id>` (a pod's
    // log dir `ns_name_uid`); a short id names nothing.
    if id.len() < 8 {
        return None;
    }
    let mut start = 0;
    for name in path.split('/') {
        let end = start + name.len();
        let names = name == id || name.starts_with(id) || name.ends_with(&format!("_{id}"));
        if names && end < path.len() {
            return Some(&path[..end + 1]);
        }
        start = end + 1;
    }
    None
}

/// The path as its line shows it: relative to the group's dir when under it; else with
/// the component naming the owner (whose line shows it whole) as `…`.
pub fn shown_path(path: &str, dir: &str, id: Option<&str>) -> String {
    if dir.is_empty() {
        return path.to_owned();
    }
    if let Some(rest) = path.strip_prefix(dir) {
        return rest.to_owned();
    }
    if dir.strip_suffix('/') == Some(path) {
        return ".".to_owned();
    }
    match id.and_then(|id| Some((id, dir_through(path, id)?))) {
        Some((_, through)) => {
            let start = through[..through.len() - 1].rfind('/').map_or(0, |i| i + 1);
            format!("{}…/{}", &path[..start], &path[through.len()..])
        }
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_keep_the_end_that_matters() {
        assert_eq!(cut("/var/lib/kubelet/pods", 10, Cut::Start), "…elet/pods");
        assert_eq!(cut("payments/db:password", 10, Cut::End), "payments/…");
        assert_eq!(cut("short", 10, Cut::End), "short");
        // A wide character is never split over the edge.
        assert_eq!(cut("秘密秘密", 5, Cut::End), "秘密…");
        assert_eq!(width(&cut("秘密秘密", 5, Cut::Start)), 5);
    }

    #[test]
    fn fitted_tables_never_pass_the_width() {
        let cols = [
            Col::fixed("A"),
            Col::fixed("B").droppable(1),
            Col::fixed("PATH").flex(8, Cut::Start, 1),
        ];
        let rows = vec![vec!["x".repeat(10), "y".repeat(30), "/p".repeat(40)]];
        for width in [20, 40, 60, 200] {
            let f = Fitted::new(&cols, &rows, Some(width), 2);
            let line = f.row(&rows[0], &View::plain(width), |_, s| s.to_owned());
            assert!(line.width() <= width, "{width}: {line}");
            assert!(line.ends_with("/p"), "{width}: {line}");
        }
        // Wide enough: B kept; too narrow: B left out, PATH still shown.
        let f = Fitted::new(&cols, &rows, Some(60), 0);
        assert!(f.row(&rows[0], &View::plain(60), |_, s| s.to_owned()).contains("yyy"));
        let f = Fitted::new(&cols, &rows, Some(40), 0);
        assert!(!f.row(&rows[0], &View::plain(40), |_, s| s.to_owned()).contains("yyy"));
    }

    #[test]
    fn views_follow_the_terminal_columns_and_no_color() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        let v = View::new(false, None, Some(80), env(&[("COLUMNS", "200")]));
        assert_eq!(v, View { width: Some(80), color: true });
        let v = View::new(false, None, None, env(&[("COLUMNS", "200")]));
        assert_eq!(v, View { width: Some(200), color: false });
        let v = View::new(false, None, None, env(&[("COLUMNS", "x")]));
        assert_eq!(v.width, Some(DEFAULT_WIDTH));
        let v = View::new(true, None, Some(80), env(&[("NO_COLOR", "1")]));
        assert_eq!(v, View { width: None, color: false });
        let v = View::new(false, Some(true), None, env(&[("NO_COLOR", "1")]));
        assert!(v.color);
        let v = View::new(false, None, Some(80), env(&[("TERM", "dumb")]));
        assert!(!v.color);
    }

    #[test]
    fn hostile_names_neither_panic_nor_overflow() {
        // Siblings that share the first byte of a two-byte character.
        let paths = ["/var/lib/etcd/member/é/db", "/var/lib/etcd/member/è/db"];
        assert_eq!(owner_dir(paths.iter().copied(), None), "/var/lib/etcd/member/");
        // A heart and its variation selector take two columns together, one apart.
        let hearts = "\u{2764}\u{fe0f}".repeat(30);
        for w in [1, 2, 5, 10, 41, 80] {
            for at in [Cut::End, Cut::Start] {
                assert!(width(&cut(&hearts, w, at)) <= w, "{w} {at:?}");
            }
        }
        let uid = "3f1c2a8e-5b7d-4e21-9a0c-6d8e2f4b1a77";
        // The id inside a name is not the id's name; a short id names nothing.
        assert_eq!(dir_through(&format!("/x/not{uid}more/y/f"), uid), None);
        assert_eq!(
            dir_through(&format!("/x/{uid}-init/f"), uid),
            Some(&*format!("/x/{uid}-init/"))
        );
        assert_eq!(dir_through("/x/ab/f", "ab"), None);
    }

    #[test]
    fn prose_wraps_at_words() {
        let v = View::plain(40);
        let lines = v.wrap(&"word ".repeat(30), 4);
        assert!(lines.len() > 1 && lines.iter().all(|l| l.width() <= 40), "{lines:?}");
        assert!(lines[1].starts_with("    word"), "{lines:?}");
    }
}
