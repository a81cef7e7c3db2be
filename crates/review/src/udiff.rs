//! Line diffs: Myers' O(ND) shortest edit script, grouped into unified-diff
//! hunks with context, as `diff -u` prints them.

/// One line of a hunk.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Line {
    /// A line both sides have, shown around a change.
    Context(String),
    /// A line only the old side has.
    Removed(String),
    /// A line only the new side has.
    Added(String),
}

impl Line {
    /// The line's text, without its marker.
    pub fn text(&self) -> &str {
        match self {
            Line::Context(t) | Line::Removed(t) | Line::Added(t) => t,
        }
    }

    /// ` `, `-` or `+`.
    pub fn marker(&self) -> char {
        match self {
            Line::Context(_) => ' ',
            Line::Removed(_) => '-',
            Line::Added(_) => '+',
        }
    }
}

/// A hunk: where it starts on each side (1-based, as `@@ -a,b +c,d @@`) and its lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    /// The hunk's first line on the old side (1-based).
    pub old_start: usize,
    /// Its lines on the old side (context and removed).
    pub old_len: usize,
    /// Its first line on the new side (1-based).
    pub new_start: usize,
    /// Its lines on the new side (context and added).
    pub new_len: usize,
    /// The lines, in order.
    pub lines: Vec<Line>,
}

impl Hunk {
    /// `@@ -12,7 +12,8 @@`
    pub fn header(&self) -> String {
        // diff -u writes the line before the hunk for an empty side.
        let start = |s: usize, n: usize| if n == 0 { s.saturating_sub(1) } else { s };
        format!("@@ -{},{} +{},{} @@", start(self.old_start, self.old_len), self.old_len, start(self.new_start, self.new_len), self.new_len)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Edit {
    Keep,
    Delete,
    Insert,
}

/// Edit distances past this (in lines) are not searched for a shortest
/// script: the differing middle is shown as removed, then added. Keeps the
/// O(D^2) trace small; a kernel diff that large is a rewrite anyway.
const MAX_EDITS: usize = 4000;

/// The edit script from `a` to `b` (Myers 1986, greedy forward search with
/// the frontier of every step kept for the backtrack).
fn script<T: PartialEq>(a: &[T], b: &[T]) -> Vec<Edit> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut out = vec![Edit::Keep; prefix];
    out.extend(middle(ma, mb));
    out.extend(std::iter::repeat_n(Edit::Keep, suffix));
    out
}

fn middle<T: PartialEq>(a: &[T], b: &[T]) -> Vec<Edit> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    if n == 0 || m == 0 {
        return std::iter::repeat_n(Edit::Delete, a.len()).chain(std::iter::repeat_n(Edit::Insert, b.len())).collect();
    }
    let max = (n + m) as usize;
    let offset = max as isize;
    // v[k + offset]: the furthest x on diagonal k = x - y.
    let mut v = vec![0isize; 2 * max + 2];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut found = None;
    for d in 0..=(max.min(MAX_EDITS) as isize) {
        trace.push(v[(offset - d) as usize..=(offset + d) as usize].to_vec());
        let mut k = -d;
        while k <= d {
            let idx = (k + offset) as usize;
            let mut x = if k == -d || (k != d && v[idx - 1] < v[idx + 1]) { v[idx + 1] } else { v[idx - 1] + 1 };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[idx] = x;
            if x >= n && y >= m {
                found = Some(d);
                break;
            }
            k += 2;
        }
        if found.is_some() {
            break;
        }
    }
    let Some(dmax) = found else {
        return std::iter::repeat_n(Edit::Delete, a.len()).chain(std::iter::repeat_n(Edit::Insert, b.len())).collect();
    };
    // Backtrack from the end, one step at a time.
    let mut edits = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (1..=dmax).rev() {
        // trace[d] is the frontier after step d - 1, for k in -d..=d at index k + d.
        let prev = &trace[d as usize];
        let at = |k: isize| prev[(k + d) as usize];
        let k = x - y;
        let insert = k == -d || (k != d && at(k - 1) < at(k + 1));
        let prev_k = if insert { k + 1 } else { k - 1 };
        let prev_x = at(prev_k);
        let prev_y = prev_x - prev_k;
        // The move lands on (mid_x, mid_y); a snake of equal lines follows.
        let mid_x = if insert { prev_x } else { prev_x + 1 };
        while x > mid_x {
            edits.push(Edit::Keep);
            x -= 1;
        }
        edits.push(if insert { Edit::Insert } else { Edit::Delete });
        x = prev_x;
        y = prev_y;
    }
    // Step 0 was a snake from (0, 0): x == y equal lines.
    debug_assert_eq!(x, y);
    edits.extend(std::iter::repeat_n(Edit::Keep, x as usize));
    edits.reverse();
    edits
}

/// The hunks of a unified diff from `old` to `new` with `context` lines of
/// context; empty when the texts have the same lines.
pub fn hunks(old: &str, new: &str, context: usize) -> Vec<Hunk> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let edits = script(&a, &b);
    // Each edit with its position on both sides.
    let mut rows: Vec<(Edit, usize, usize)> = Vec::with_capacity(edits.len());
    let (mut i, mut j) = (0, 0);
    for e in edits {
        rows.push((e, i, j));
        match e {
            Edit::Keep => {
                i += 1;
                j += 1;
            }
            Edit::Delete => i += 1,
            Edit::Insert => j += 1,
        }
    }
    let changed: Vec<usize> = rows.iter().enumerate().filter(|(_, r)| r.0 != Edit::Keep).map(|(n, _)| n).collect();
    let mut out = Vec::new();
    let mut g = 0;
    while g < changed.len() {
        // Changes closer than 2 * context lines share a hunk.
        let mut end = g;
        while end + 1 < changed.len() && changed[end + 1] - changed[end] <= 2 * context + 1 {
            end += 1;
        }
        let from = changed[g].saturating_sub(context);
        let to = (changed[end] + context + 1).min(rows.len());
        let mut lines = Vec::new();
        let (mut old_len, mut new_len) = (0, 0);
        for &(e, i, j) in &rows[from..to] {
            match e {
                Edit::Keep => {
                    lines.push(Line::Context(a[i].to_string()));
                    old_len += 1;
                    new_len += 1;
                }
                Edit::Delete => {
                    lines.push(Line::Removed(a[i].to_string()));
                    old_len += 1;
                }
                Edit::Insert => {
                    lines.push(Line::Added(b[j].to_string()));
                    new_len += 1;
                }
            }
        }
        let (_, i0, j0) = rows[from];
        out.push(Hunk { old_start: i0 + 1, old_len, new_start: j0 + 1, new_len, lines });
        g = end + 1;
    }
    out
}

/// The unified diff text (`---`/`+++` headers, then the hunks).
pub fn unified(old_label: &str, new_label: &str, hunks: &[Hunk]) -> String {
    let mut s = format!("--- {old_label}\n+++ {new_label}\n");
    for h in hunks {
        s.push_str(&h.header());
        s.push('\n');
        for l in &h.lines {
            s.push(l.marker());
            s.push_str(l.text());
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applying the script to `a` gives `b`, and its length is the edit distance.
    fn check(a: &[u8], b: &[u8]) -> usize {
        let s = script(a, b);
        let (mut i, mut j) = (0, 0);
        let mut edits = 0;
        for e in &s {
            match e {
                Edit::Keep => {
                    assert_eq!(a[i], b[j], "{a:?} -> {b:?}: {s:?}");
                    i += 1;
                    j += 1;
                }
                Edit::Delete => {
                    i += 1;
                    edits += 1;
                }
                Edit::Insert => {
                    j += 1;
                    edits += 1;
                }
            }
        }
        assert_eq!((i, j), (a.len(), b.len()), "{a:?} -> {b:?}: {s:?}");
        edits
    }

    /// The LCS length by dynamic programming, for the distance check.
    fn lcs(a: &[u8], b: &[u8]) -> usize {
        let mut t = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in 0..a.len() {
            for j in 0..b.len() {
                t[i + 1][j + 1] = if a[i] == b[j] { t[i][j] + 1 } else { t[i][j + 1].max(t[i + 1][j]) };
            }
        }
        t[a.len()][b.len()]
    }

    #[test]
    fn scripts_are_shortest() {
        let cases: [(&[u8], &[u8]); 8] = [
            (b"abcabba", b"cbabac"),
            (b"", b"abc"),
            (b"abc", b""),
            (b"abc", b"abc"),
            (b"abcdef", b"abxdef"),
            (b"aaaa", b"aa"),
            (b"xaby", b"ab"),
            (b"abgdef", b"gh"),
        ];
        for (a, b) in cases {
            assert_eq!(check(a, b), a.len() + b.len() - 2 * lcs(a, b), "{a:?} {b:?}");
        }
        // Pseudo-random strings over a small alphabet.
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for _ in 0..300 {
            let a: Vec<u8> = (0..next() % 30).map(|_| b"abc"[next() % 3]).collect();
            let b: Vec<u8> = (0..next() % 30).map(|_| b"abc"[next() % 3]).collect();
            assert_eq!(check(&a, &b), a.len() + b.len() - 2 * lcs(&a, &b), "{a:?} {b:?}");
        }
    }

    #[test]
    fn hunks_have_context_and_positions() {
        let old: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 5\n", "line five\n").replace("line 18\n", "line 18\nline 18b\n");
        let h = hunks(&old, &new, 3);
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].header(), "@@ -2,7 +2,7 @@");
        assert_eq!(h[1].header(), "@@ -16,5 +16,6 @@");
        let text = unified("a", "b", &h);
        assert!(text.contains("-line 5\n+line five\n"), "{text}");
        assert!(text.contains(" line 18\n+line 18b\n line 19\n"), "{text}");
        assert!(hunks(&old, &old, 3).is_empty());
        // Nearby changes merge into one hunk.
        let near = old.replace("line 5\n", "x\n").replace("line 9\n", "y\n");
        assert_eq!(hunks(&old, &near, 3).len(), 1);
        // From nothing.
        assert_eq!(hunks("", "a\nb\n", 3)[0].header(), "@@ -0,0 +1,2 @@");
    }
}
