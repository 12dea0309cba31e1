//! SELinux `file_contexts` (text form), as `uf2fs import --file-contexts` reads it: which label
//! each imported path gets, chosen by the rules libselinux's `label_file` backend applies
//! (the one sload.f2fs asks through `selabel_lookup`). Our own implementation, on the `regex`
//! crate; see "Android-style builds" in docs/design.md for the rules and where we differ.
//!
//! A line is `REGEX [TYPE] CONTEXT`, fields separated by blanks; blank lines and lines whose
//! first non-blank is `#` are skipped. REGEX is anchored at both ends by adding `^` and `$`
//! around it as written (so a top-level `a|b` is `^a|b$`, as libselinux builds it). TYPE is one
//! of `--` (regular file), `-d`, `-l`, `-c`, `-b`, `-p`, `-s`; without it the line applies to
//! every type. CONTEXT `<<none>>` means "no label".
//!
//! Which line wins: lines whose REGEX holds none of `.^$?*+|[({` (exact paths, a `\` escaping
//! the next byte) are tried before every line with such a character; within each group the
//! last line of the file is tried first. The first line that applies to the file's type and
//! whose anchored REGEX matches the whole path gives the label. A line whose REGEX begins with
//! a literal first component (`/system/...`: no special character before the second `/`) is
//! only tried for paths whose first component is exactly that.

use regex::bytes::{Regex, RegexBuilder};
use std::path::Path;

/// One line of the file.
#[derive(Debug)]
struct Spec {
    regex: Regex,
    /// The S_IFMT bits the line is limited to, 0 for any.
    kind: u32,
    /// `None` for `<<none>>`.
    context: Option<Vec<u8>>,
    /// The literal first component (`/system`), when the regex begins with one.
    stem: Option<Vec<u8>>,
}

/// A parsed file_contexts, in the order lookups try its lines.
#[derive(Debug)]
pub struct FileContexts {
    specs: Vec<Spec>,
}

const META: &[u8] = b".^$?*+|[({";

/// Whether libselinux treats the regex as an exact path (no special character, a backslash
/// taking the next byte as it is).
fn has_meta(re: &[u8]) -> bool {
    let mut it = re.iter();
    while let Some(c) = it.next() {
        if *c == b'\\' {
            it.next();
        } else if META.contains(c) {
            return true;
        }
    }
    false
}

/// The first component of a regex (`/system` in `/system/bin(/.*)?`) when nothing before
/// the second `/` is special.
fn spec_stem(re: &[u8]) -> Option<Vec<u8>> {
    let end = re.iter().skip(1).position(|&c| c == b'/')? + 1;
    let head = re.get(..end)?;
    (!head.iter().any(|c| META.contains(c))).then(|| head.to_vec())
}

/// The first component of a path (`/system` in `/system/bin/sh`); none for `/x`.
fn path_stem(path: &[u8]) -> Option<&[u8]> {
    let end = path.iter().skip(1).position(|&c| c == b'/')? + 1;
    path.get(..end)
}

/// The S_IFMT bits a TYPE field stands for.
fn kind_of(field: &[u8]) -> Option<u32> {
    Some(match field {
        b"--" => 0o100000,
        b"-d" => 0o040000,
        b"-l" => 0o120000,
        b"-c" => 0o020000,
        b"-b" => 0o060000,
        b"-p" => 0o010000,
        b"-s" => 0o140000,
        _ => return None,
    })
}

/// The longest file we read: real policies are a few hundred KiB.
const MAX_FILE: u64 = 64 << 20;

impl FileContexts {
    /// Reads and parses `path`; errors name the file and line.
    pub fn load(path: &Path) -> Result<FileContexts, String> {
        let text = crate::fs_config::read_limited(path, MAX_FILE)?;
        FileContexts::parse(&text, &path.display().to_string())
    }

    /// Parses the text of a file_contexts; `name` is the file's name for errors.
    pub fn parse(text: &[u8], name: &str) -> Result<FileContexts, String> {
        if text.starts_with(&0xf97c_ff8a_u32.to_le_bytes()) {
            return Err(format!(
                "{name}: a compiled file_contexts (.bin); give the text file_contexts"
            ));
        }
        let mut exact = Vec::new();
        let mut patterns = Vec::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let at = format!("{name}:{}", i + 1);
            let fields: Vec<&[u8]> = line
                .split(|b| b.is_ascii_whitespace())
                .filter(|f| !f.is_empty())
                .collect();
            let (re, kind, context) = match fields.as_slice() {
                [] => continue,
                [first, ..] if first.starts_with(b"#") => continue,
                [re, context] => (*re, 0, *context),
                [re, kind, context] => (
                    *re,
                    kind_of(kind).ok_or_else(|| {
                        format!(
                            "{at}: file type {:?} is none of --, -d, -l, -c, -b, -p, -s",
                            String::from_utf8_lossy(kind)
                        )
                    })?,
                    *context,
                ),
                [_] => return Err(format!("{at}: a path regex needs a context after it")),
                _ => {
                    return Err(format!(
                        "{at}: {} fields; a line is REGEX [TYPE] CONTEXT",
                        fields.len()
                    ))
                }
            };
            let re_text = std::str::from_utf8(re)
                .map_err(|_| format!("{at}: the regex is not UTF-8 text"))?;
            // As libselinux anchors it: ^ and $ around the text as written, no group.
            let regex = RegexBuilder::new(&format!("^{re_text}$"))
                .unicode(false)
                .dot_matches_new_line(true)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| {
                    let why = e.to_string();
                    let short = why.lines().last().unwrap_or("").trim().to_owned();
                    format!("{at}: invalid regex {re_text:?}: {short}")
                })?;
            let context = if context == b"<<none>>" {
                None
            } else {
                if context.contains(&0) {
                    return Err(format!("{at}: the context holds a NUL byte"));
                }
                Some(context.to_vec())
            };
            let spec = Spec {
                regex,
                kind,
                context,
                stem: spec_stem(re),
            };
            if has_meta(re) {
                patterns.push(spec);
            } else {
                exact.push(spec);
            }
        }
        // Lookup order: exact paths, last line first, then the patterns, last line first.
        exact.reverse();
        patterns.reverse();
        exact.append(&mut patterns);
        Ok(FileContexts { specs: exact })
    }

    /// The label of `path` (absolute, as the device will see it) for a file of S_IFMT `kind`:
    /// `None` when no line matches or the matching line says `<<none>>`.
    pub fn lookup(&self, path: &[u8], kind: u32) -> Option<&[u8]> {
        let key = normalize(path);
        let stem = path_stem(&key);
        let kind = kind & 0o170000;
        self.specs
            .iter()
            .filter(|s| s.kind == 0 || kind == 0 || s.kind == kind)
            .filter(|s| s.stem.is_none() || s.stem.as_deref() == stem)
            .find(|s| s.regex.is_match(&key))
            .and_then(|s| s.context.as_deref())
    }
}

/// `//` collapsed to `/` and a trailing `/` dropped, as libselinux cleans a key.
fn normalize(path: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(path.len());
    for &b in path {
        if b == b'/' && out.last() == Some(&b'/') {
            continue;
        }
        out.push(b);
    }
    if out.len() > 1 && out.last() == Some(&b'/') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::FileContexts;

    const DIR: u32 = 0o040000;
    const REG: u32 = 0o100000;
    const LNK: u32 = 0o120000;

    fn fc(text: &str) -> FileContexts {
        FileContexts::parse(text.as_bytes(), "fc").unwrap()
    }

    fn label<'a>(f: &'a FileContexts, path: &str, kind: u32) -> Option<&'a str> {
        f.lookup(path.as_bytes(), kind)
            .map(|l| std::str::from_utf8(l).unwrap())
    }

    #[test]
    fn the_last_matching_line_wins() {
        let f = fc("/(.*)?  u:object_r:a:s0\n/system(/.*)?  u:object_r:b:s0\n");
        assert_eq!(label(&f, "/system/bin/sh", REG), Some("u:object_r:b:s0"));
        assert_eq!(label(&f, "/data", DIR), Some("u:object_r:a:s0"));
        let f = fc("/system(/.*)?  u:object_r:b:s0\n/(.*)?  u:object_r:a:s0\n");
        assert_eq!(label(&f, "/system/bin/sh", REG), Some("u:object_r:a:s0"));
    }

    #[test]
    fn exact_paths_win_over_earlier_and_later_patterns() {
        let f = fc("/system/bin/sh u:object_r:shell:s0\n/system(/.*)? u:object_r:b:s0\n");
        assert_eq!(
            label(&f, "/system/bin/sh", REG),
            Some("u:object_r:shell:s0")
        );
        assert_eq!(label(&f, "/system/bin/ls", REG), Some("u:object_r:b:s0"));
        // An escaped dot keeps the line exact.
        let f = fc("/a\\.b u:object_r:x:s0\n/a.b(/.*)? u:object_r:y:s0\n");
        assert_eq!(label(&f, "/a.b", REG), Some("u:object_r:x:s0"));
    }

    #[test]
    fn file_types_limit_a_line() {
        let f = fc(
            "/x(/.*)? u:object_r:any:s0\n/x/y -d u:object_r:dir:s0\n/x/y -l u:object_r:lnk:s0\n",
        );
        assert_eq!(label(&f, "/x/y", DIR), Some("u:object_r:dir:s0"));
        assert_eq!(label(&f, "/x/y", LNK), Some("u:object_r:lnk:s0"));
        assert_eq!(label(&f, "/x/y", REG), Some("u:object_r:any:s0"));
    }

    #[test]
    fn none_means_no_label_and_stops_the_search() {
        let f = fc("/(.*)? u:object_r:a:s0\n/tmp(/.*)? <<none>>\n");
        assert_eq!(label(&f, "/tmp/x", REG), None);
        assert_eq!(label(&f, "/etc", DIR), Some("u:object_r:a:s0"));
    }

    #[test]
    fn regexes_are_anchored_as_written() {
        let f = fc("/ab u:object_r:a:s0\n");
        assert_eq!(label(&f, "/abc", REG), None);
        assert_eq!(label(&f, "/x/ab", REG), None);
        // ^/a|/b$: libselinux adds no group, so the alternation is not anchored both ways.
        let f = fc("/a|/b u:object_r:a:s0\n");
        assert_eq!(label(&f, "/axyz", REG), Some("u:object_r:a:s0"));
        assert_eq!(label(&f, "/q/b", REG), Some("u:object_r:a:s0"));
    }

    #[test]
    fn keys_are_cleaned_of_double_and_trailing_slashes() {
        let f = fc("/ u:object_r:root:s0\n/a/b u:object_r:b:s0\n");
        assert_eq!(label(&f, "//", DIR), Some("u:object_r:root:s0"));
        assert_eq!(label(&f, "//a//b/", DIR), Some("u:object_r:b:s0"));
    }

    #[test]
    fn a_literal_first_component_only_meets_paths_under_it() {
        // libselinux's stems: "/a\-b/.*" has the literal stem "/a\-b", which no path
        // equals, though the regex matches "/a-b/y".
        let f = fc("/a\\-b/.* u:object_r:a:s0\n");
        assert_eq!(label(&f, "/a-b/y", REG), None);
        // A '.' before the second '/' (escaped or not) means no stem: tried on every path.
        let f = fc("/sys\\.x/.* u:object_r:a:s0\n");
        assert_eq!(label(&f, "/sys.x/y", REG), Some("u:object_r:a:s0"));
        let f = fc("/sys/.* u:object_r:a:s0\n");
        assert_eq!(label(&f, "/sys/y", REG), Some("u:object_r:a:s0"));
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let f = fc("# policy\n\n   \n  # indented comment\n/a u:object_r:a:s0\n");
        assert_eq!(label(&f, "/a", REG), Some("u:object_r:a:s0"));
    }

    #[test]
    fn malformed_lines_are_refused_with_their_line() {
        let e = FileContexts::parse(b"/a u:r:a:s0\n/b -q u:r:b:s0\n", "fc").unwrap_err();
        assert!(e.starts_with("fc:2: file type \"-q\""), "{e}");
        let e = FileContexts::parse(b"/a\n", "fc").unwrap_err();
        assert!(e.starts_with("fc:1: a path regex needs a context"), "{e}");
        let e = FileContexts::parse(b"# x\n/a -- u:r:a:s0 extra\n", "fc").unwrap_err();
        assert!(e.starts_with("fc:2: 4 fields"), "{e}");
        let e = FileContexts::parse(b"/a(b u:r:a:s0\n", "fc").unwrap_err();
        assert!(e.starts_with("fc:1: invalid regex \"/a(b\""), "{e}");
        let e = FileContexts::parse(b"/a\xff u:r:a:s0\n", "fc").unwrap_err();
        assert!(e.starts_with("fc:1: the regex is not UTF-8"), "{e}");
        let e = FileContexts::parse(&[0x8a, 0xff, 0x7c, 0xf9, 0, 0], "fc").unwrap_err();
        assert!(e.contains("compiled file_contexts"), "{e}");
    }

    #[test]
    fn a_huge_regex_is_refused_not_built() {
        let text = "/(a{1000}){1000} u:r:a:s0\n";
        let e = FileContexts::parse(text.as_bytes(), "fc").unwrap_err();
        assert!(e.starts_with("fc:1: invalid regex"), "{e}");
    }
}
