//! Knobs given on the command line: `python train.py -j 0`,
//! `--workers=0`, LightningCLI's `--data.num_workers 0`, HfArgumentParser's
//! `--dataloader_num_workers 0`.
//!
//! In command mode the user's command is `[bench] run` of `tuneloop.toml`.
//! When it passes the flag that feeds a knob, the flag's `default=` is never
//! used, so the knob is changed where the command sets it: the one word of
//! that array, every other byte of the file kept. The workspace file is then
//! one of the files a turn may change (the run loop carries it with the
//! editable files), so interleaving, keeping, reverting byte for byte,
//! `resume` and `restore` treat it like any other; the bench reads the
//! command from it before each run.
//!
//! This module owns the command's words: which word passes which option
//! ([`find_passed`]), the `[bench] run` array's place in the file
//! ([`run_array`]), rewriting one word ([`set_word`]), and checking that a
//! turn's edit of the file is exactly one knob's argument ([`command_edit`]).
//! Which option feeds which knob comes from [`super::knobs`] (argparse
//! `add_argument` calls, `HfArgumentParser`, `LightningCLI`). Pure functions;
//! nothing here reads or writes files.

use std::ops::Range;

use thiserror::Error;

use super::types::{KnobSite, Source, SourceChange};

// Defined with the knob sources that name it; the command line is where
// the rest of the tree has always found it.
pub use super::types::RUN_FILE;

/// Why a word of `[bench] run` cannot be written ([`set_word`],
/// [`append_words`]): the file no longer has what was read from it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RunWordsError {
    #[error("{} has no [bench] run array of strings", RUN_FILE)]
    NoRunArray,
    /// `index` is 0-based, as the caller asked for it.
    #[error(
        "[bench] run in {} has no word {index} (it changed since it was read)",
        RUN_FILE
    )]
    NoWord { index: usize },
}

/// Why a turn's edit of the workspace file is not exactly one knob's
/// argument ([`command_edit`]). A type of its own, apart from
/// [`RunWordsError`]: these are verdicts on someone else's edit, which
/// verification records as the turn's rejection.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CommandEditError {
    #[error(
        "{} changed, and its [bench] run is no longer an array of strings",
        RUN_FILE
    )]
    NotAnArray,
    #[error("{} changed beyond the [bench] run command; only the argument that passes a knob's value may change", RUN_FILE)]
    BeyondTheCommand,
    #[error("{} changed, but no word of [bench] run did", RUN_FILE)]
    NoWordChanged,
    #[error(
        "{count} words of [bench] run in {} changed; a turn changes one knob's argument",
        RUN_FILE
    )]
    SeveralWordsChanged { count: usize },
    /// `word` is 1-based; `was` its text before the edit.
    #[error(
        "word {word} of [bench] run (`{was}`) changed, but it passes no DataLoader knob's value"
    )]
    NotAKnobWord { word: usize, was: String },
    #[error("`{was}` in [bench] run became `{now}`: only the value after {flag} may change")]
    BeyondTheValue {
        was: String,
        now: String,
        flag: String,
    },
    /// The knob's wrapper (`int(args.workers) * 2`) cannot produce `to`.
    #[error("{flag} {to} in [bench] run: {why}")]
    WrapperRefuses {
        flag: String,
        to: String,
        why: String,
    },
    #[error("`{flag} {to}` was added to [bench] run, but {flag} sets no DataLoader knob the command leaves unset")]
    NotAKnobFlag { flag: String, to: String },
    #[error(
        "[bench] run in {} gained or lost words; a turn changes one knob's argument",
        RUN_FILE
    )]
    WordsAddedOrLost,
}

/// One string of the `[bench] run` array as it sits in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Word {
    pub value: String,
    /// Bytes of the TOML string, quotes included.
    pub range: Range<usize>,
    /// 1-based line.
    pub line: usize,
}

/// The `[bench] run` array of a workspace file: its words and the bytes of
/// the whole array (`[` to `]`). `None`: no such key, or not an array of
/// plain strings.
pub fn run_array(toml: &str) -> Option<(Vec<Word>, Range<usize>)> {
    let mut table = String::new();
    let mut pos = 0;
    for line in toml.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let content = line.trim_start();
        if content.starts_with('[') && !content.starts_with("[[") {
            let end = content.find(']')?;
            table = content[1..end].trim().to_string();
            continue;
        }
        let Some(eq) = content.find('=') else {
            continue;
        };
        let key: String = content[..eq]
            .split('.')
            .map(|k| k.trim().trim_matches('"'))
            .collect::<Vec<_>>()
            .join(".");
        let full = if table.is_empty() {
            key
        } else {
            format!("{table}.{key}")
        };
        if full != "bench.run" {
            continue;
        }
        let after = start + (line.len() - content.len()) + eq + 1;
        let open = after + toml[after..].find(|c: char| !c.is_whitespace())?;
        if toml.as_bytes()[open] != b'[' {
            return None;
        }
        return scan_array(toml, open);
    }
    None
}

/// The strings of the array opening at `open`, up to its `]`.
fn scan_array(toml: &str, open: usize) -> Option<(Vec<Word>, Range<usize>)> {
    let bytes = toml.as_bytes();
    let mut words = Vec::new();
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b']' => return Some((words, open..i + 1)),
            b' ' | b'\t' | b'\r' | b'\n' | b',' => i += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            q @ (b'"' | b'\'') => {
                if toml[i..].starts_with("\"\"\"") || toml[i..].starts_with("'''") {
                    return None;
                }
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    if q == b'"' && bytes[i] == b'\\' {
                        i += 1;
                    }
                    if bytes.get(i).is_none_or(|b| *b == b'\n') {
                        return None;
                    }
                    i += 1;
                }
                if i >= bytes.len() {
                    return None;
                }
                i += 1;
                let literal = &toml[start..i];
                let value: String = toml::from_str::<toml::Table>(&format!("v = {literal}"))
                    .ok()?
                    .get("v")?
                    .as_str()?
                    .to_string();
                words.push(Word {
                    value,
                    range: start..i,
                    line: toml[..start].matches('\n').count() + 1,
                });
            }
            _ => return None,
        }
    }
    None
}

/// The words of `[bench] run`.
pub fn run_words(toml: &str) -> Option<Vec<String>> {
    run_array(toml).map(|(w, _)| w.into_iter().map(|w| w.value).collect())
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// The workspace file with word `index` of `[bench] run` replaced by
/// `word`; every other byte kept.
pub fn set_word(toml: &str, index: usize, word: &str) -> Result<String, RunWordsError> {
    let (words, _) = run_array(toml).ok_or(RunWordsError::NoRunArray)?;
    let w = words.get(index).ok_or(RunWordsError::NoWord { index })?;
    Ok(format!(
        "{}{}{}",
        &toml[..w.range.start],
        toml_string(word),
        &toml[w.range.end..]
    ))
}

/// The workspace file with `extra` words added at the end of `[bench] run`
/// (after its last word, on the same line).
pub fn append_words(toml: &str, extra: &[String]) -> Result<String, RunWordsError> {
    let (words, array) = run_array(toml).ok_or(RunWordsError::NoRunArray)?;
    let added: Vec<String> = extra.iter().map(|w| toml_string(w)).collect();
    let (at, text) = match words.last() {
        Some(last) => (last.range.end, format!(", {}", added.join(", "))),
        None => (array.start + 1, added.join(", ")),
    };
    Ok(format!("{}{text}{}", &toml[..at], &toml[at..]))
}

/// Index of the first word after the script the command runs, when it runs
/// `script` (`python train.py …`, `torchrun … train.py …`,
/// `python -m pkg.train …`); `None` when it runs another file.
pub fn script_args_start(words: &[String], script: &str) -> Option<usize> {
    let script = script.strip_prefix("./").unwrap_or(script);
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w == "-m" && i + 1 < words.len() {
            let base = words[i + 1].replace('.', "/");
            if script == format!("{base}.py") || script == format!("{base}/__main__.py") {
                return Some(i + 2);
            }
            i += 2;
            continue;
        }
        if w.ends_with(".py") {
            let rel = w.strip_prefix("./").unwrap_or(w);
            return (rel == script).then_some(i + 1);
        }
        i += 1;
    }
    None
}

/// How the command passes an option.
#[derive(Clone, Debug, PartialEq)]
pub enum Passed {
    /// `-j 0`, `--workers=0`, `-j0`: the word holding the value, and the text
    /// before the value in it (`""`, `"--workers="`, `"-j"`).
    Value {
        option: String,
        index: usize,
        prefix: String,
        value: String,
    },
    /// `--pin` with no value: a switch.
    Switch { option: String, index: usize },
}

impl Passed {
    pub fn index(&self) -> usize {
        match self {
            Passed::Value { index, .. } | Passed::Switch { index, .. } => *index,
        }
    }
}

fn is_value_word(w: &str) -> bool {
    !w.starts_with('-') || w.parse::<f64>().is_ok()
}

/// Where `words[from..]` pass one of `options` (the last time, as argparse
/// takes the last): `-j 0`, `--workers 0`, `--workers=0`, `-j0`. Words
/// after a bare `--` are positional and not looked at.
pub fn find_passed(words: &[String], from: usize, options: &[String]) -> Option<Passed> {
    let mut found = None;
    let mut i = from;
    while i < words.len() {
        let w = &words[i];
        if w == "--" {
            break;
        }
        if options.iter().any(|o| o == w) {
            match words.get(i + 1).filter(|v| is_value_word(v)) {
                Some(v) => {
                    found = Some(Passed::Value {
                        option: w.clone(),
                        index: i + 1,
                        prefix: String::new(),
                        value: v.clone(),
                    });
                    i += 2;
                    continue;
                }
                None => {
                    found = Some(Passed::Switch {
                        option: w.clone(),
                        index: i,
                    })
                }
            }
        } else if let Some(o) = options.iter().find(|o| {
            (o.starts_with("--") && w.starts_with(&format!("{o}=")))
                || (o.len() == 2
                    && !o.starts_with("--")
                    && w.starts_with(o.as_str())
                    && w.len() > 2)
        }) {
            let prefix = if o.starts_with("--") {
                format!("{o}=")
            } else {
                o.clone()
            };
            found = Some(Passed::Value {
                option: o.clone(),
                index: i,
                prefix: prefix.clone(),
                value: w[prefix.len()..].to_string(),
            });
        }
        i += 1;
    }
    found
}

/// A Python literal as a command-line word: `8`, `True`; a string literal
/// without its quotes.
pub fn as_word(value: &str) -> String {
    let v = value.trim();
    for q in ["\"", "'"] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return v[1..v.len() - 1].to_string();
        }
    }
    v.to_string()
}

/// The knob changes an edit of the workspace file makes: exactly one word of
/// `[bench] run` that passes a knob's value (or, for a knob only the command
/// line can set, its option and value added at the end), nothing else in
/// the file. `sites` are the knob sites of the project's scripts before the
/// edit, read with the workspace file as it was.
pub fn command_edit(
    old: &str,
    new: &str,
    sites: &[KnobSite],
) -> Result<Vec<SourceChange>, CommandEditError> {
    let (Some((old_words, old_array)), Some((new_words, new_array))) =
        (run_array(old), run_array(new))
    else {
        return Err(CommandEditError::NotAnArray);
    };
    if old[..old_array.start] != new[..new_array.start]
        || old[old_array.end..] != new[new_array.end..]
    {
        return Err(CommandEditError::BeyondTheCommand);
    }
    let old_values: Vec<&str> = old_words.iter().map(|w| w.value.as_str()).collect();
    let new_values: Vec<&str> = new_words.iter().map(|w| w.value.as_str()).collect();
    let origins = || {
        sites.iter().flat_map(|s| {
            s.knobs.iter().filter_map(move |o| match &o.source {
                Source::Command {
                    flag,
                    index,
                    prefix,
                    line,
                    ..
                } => Some((o, flag, *index, prefix, *line)),
                _ => None,
            })
        })
    };
    if old_values.len() == new_values.len() {
        let changed: Vec<usize> = (0..old_values.len())
            .filter(|i| old_values[*i] != new_values[*i])
            .collect();
        let [i] = changed.as_slice() else {
            return Err(if changed.is_empty() {
                CommandEditError::NoWordChanged
            } else {
                CommandEditError::SeveralWordsChanged {
                    count: changed.len(),
                }
            });
        };
        let Some((o, flag, _, prefix, line)) = origins().find(|(_, _, idx, _, _)| *idx == Some(*i))
        else {
            return Err(CommandEditError::NotAKnobWord {
                word: i + 1,
                was: old_values[*i].to_string(),
            });
        };
        let Some(to) = new_values[*i].strip_prefix(prefix.as_str()) else {
            return Err(CommandEditError::BeyondTheValue {
                was: old_values[*i].to_string(),
                now: new_values[*i].to_string(),
                flag: flag.to_string(),
            });
        };
        if let Some(why) = o.refuses(to) {
            return Err(CommandEditError::WrapperRefuses {
                flag: flag.to_string(),
                to: to.to_string(),
                why,
            });
        }
        let from = &old_values[*i][prefix.len()..];
        return Ok(vec![SourceChange {
            file: RUN_FILE.to_string(),
            knob: o.knob.clone(),
            change: format!(
                "{} {from} → {to} ({flag} in [bench] run, {RUN_FILE}:{line})",
                o.knob
            ),
            line,
        }]);
    }
    // A knob only the command line sets, added: `--dataloader_num_workers 8`.
    if new_values.len() == old_values.len() + 2 && new_values[..old_values.len()] == old_values[..]
    {
        let (flag, to) = (
            new_values[old_values.len()],
            new_values[old_values.len() + 1],
        );
        let Some((o, _, _, _, line)) =
            origins().find(|(_, f, idx, _, _)| idx.is_none() && f.as_str() == flag)
        else {
            return Err(CommandEditError::NotAKnobFlag {
                flag: flag.to_string(),
                to: to.to_string(),
            });
        };
        if let Some(why) = o.refuses(to) {
            return Err(CommandEditError::WrapperRefuses {
                flag: flag.to_string(),
                to: to.to_string(),
                why,
            });
        }
        return Ok(vec![SourceChange {
            file: RUN_FILE.to_string(),
            knob: o.knob.clone(),
            change: format!(
                "{} (default) → {to} ({flag} added to [bench] run, {RUN_FILE}:{line})",
                o.knob
            ),
            line,
        }]);
    }
    Err(CommandEditError::WordsAddedOrLost)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    const WS: &str = "# tuneloop workspace\n\n[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\n# Your training command\nrun = [\"python\", \"train.py\", \"-j\", \"0\", \"--epochs\", \"3\"]\nsteps = 40\n";

    #[test]
    fn the_run_array_is_found_word_by_word() {
        let (words, array) = run_array(WS).unwrap();
        assert_eq!(
            words.iter().map(|w| w.value.as_str()).collect::<Vec<_>>(),
            ["python", "train.py", "-j", "0", "--epochs", "3"]
        );
        assert_eq!(&WS[words[3].range.clone()], "\"0\"");
        assert_eq!(words[3].line, 9);
        assert!(WS[array].starts_with("[\"python\""));
        // A multi-line array with comments, literal strings and escapes.
        let multi = "[bench]\nrun = [\n  'python',  # the interpreter\n  \"train.py\",\n  \"--name=a\\\"b\",\n]\n";
        assert_eq!(
            run_words(multi).unwrap(),
            ["python", "train.py", "--name=a\"b"]
        );
        assert_eq!(run_array(multi).unwrap().0[1].line, 4);
        // Dotted keys, other tables.
        assert_eq!(
            run_words("bench.run = [\"x\"]\n[run]\nrun = [\"y\"]\n").unwrap(),
            ["x"]
        );
        assert_eq!(run_words("[run]\nrun = [\"y\"]\n"), None);
        assert_eq!(run_words("[bench]\nentry = \"train:build\"\n"), None);
    }

    #[test]
    fn one_word_is_replaced_and_nothing_else() {
        let out = set_word(WS, 3, "8").unwrap();
        assert_eq!(out, WS.replace("\"-j\", \"0\"", "\"-j\", \"8\""));
        let out = append_words(WS, &w(&["--dataloader_num_workers", "8"])).unwrap();
        assert!(
            out.contains("\"3\", \"--dataloader_num_workers\", \"8\"]\nsteps"),
            "{out}"
        );
        assert_eq!(run_words(&out).unwrap().len(), 8);
        assert_eq!(
            set_word(WS, 9, "x"),
            Err(RunWordsError::NoWord { index: 9 })
        );
        assert_eq!(
            RunWordsError::NoWord { index: 9 }.to_string(),
            "[bench] run in tuneloop.toml has no word 9 (it changed since it was read)"
        );
        assert_eq!(
            append_words("[bench]\nrun = 'python t.py'\n", &w(&["-j"])),
            Err(RunWordsError::NoRunArray)
        );
        assert_eq!(
            RunWordsError::NoRunArray.to_string(),
            "tuneloop.toml has no [bench] run array of strings"
        );
    }

    #[test]
    fn the_script_and_its_arguments_are_told_from_the_launcher() {
        assert_eq!(
            script_args_start(&w(&["python", "train.py", "-j", "0"]), "train.py"),
            Some(2)
        );
        assert_eq!(
            script_args_start(
                &w(&["torchrun", "--nproc_per_node", "2", "./train.py", "-j"]),
                "train.py"
            ),
            Some(4)
        );
        assert_eq!(
            script_args_start(&w(&["python", "-m", "pkg.train", "-j"]), "pkg/train.py"),
            Some(3)
        );
        assert_eq!(
            script_args_start(&w(&["python", "other.py", "-j"]), "train.py"),
            None
        );
    }

    #[test]
    fn every_way_of_passing_a_value_is_found() {
        let opts = w(&["-j", "--workers"]);
        let cmd = |v: &[&str]| find_passed(&w(v), 2, &opts);
        let value = |option: &str, index, prefix: &str, value: &str| Passed::Value {
            option: option.into(),
            index,
            prefix: prefix.into(),
            value: value.into(),
        };
        assert_eq!(
            cmd(&["python", "t.py", "-j", "0"]),
            Some(value("-j", 3, "", "0"))
        );
        assert_eq!(
            cmd(&["python", "t.py", "--workers", "4", "--epochs", "3"]),
            Some(value("--workers", 3, "", "4"))
        );
        assert_eq!(
            cmd(&["python", "t.py", "--workers=4"]),
            Some(value("--workers", 2, "--workers=", "4"))
        );
        assert_eq!(
            cmd(&["python", "t.py", "-j0"]),
            Some(value("-j", 2, "-j", "0"))
        );
        // argparse takes the last.
        assert_eq!(
            cmd(&["python", "t.py", "-j", "0", "--workers", "2"]),
            Some(value("--workers", 5, "", "2"))
        );
        // Not passed; after `--`; a longer option that only starts alike.
        assert_eq!(cmd(&["python", "t.py", "--epochs", "3"]), None);
        assert_eq!(cmd(&["python", "t.py", "--", "-j", "3"]), None);
        assert_eq!(cmd(&["python", "t.py", "--workers-per-gpu", "3"]), None);
        // The interpreter's own words are not the script's.
        assert_eq!(
            find_passed(&w(&["python", "-j", "2", "t.py"]), 4, &opts),
            None
        );
        // A switch passes no value.
        assert_eq!(
            find_passed(
                &w(&["python", "t.py", "--pin", "--epochs", "1"]),
                2,
                &w(&["--pin"])
            ),
            Some(Passed::Switch {
                option: "--pin".into(),
                index: 2
            })
        );
        // Dotted LightningCLI and HfArgumentParser options are plain options.
        assert_eq!(
            find_passed(
                &w(&["python", "t.py", "fit", "--data.num_workers", "0"]),
                2,
                &w(&["--data.num_workers"])
            ),
            Some(value("--data.num_workers", 4, "", "0"))
        );
        assert_eq!(as_word("8"), "8");
        assert_eq!(as_word("'a'"), "a");
    }

    /// The verdicts' words are the rejection reasons verification records:
    /// pinned as they were written when they were strings.
    #[test]
    fn verdicts_keep_their_recorded_words() {
        use CommandEditError as E;
        let s = |t: &str| t.to_string();
        for (e, words) in [
            (E::NotAnArray, "tuneloop.toml changed, and its [bench] run is no longer an array of strings"),
            (E::BeyondTheCommand, "tuneloop.toml changed beyond the [bench] run command; only the argument that passes a knob's value may change"),
            (E::NoWordChanged, "tuneloop.toml changed, but no word of [bench] run did"),
            (E::SeveralWordsChanged { count: 2 }, "2 words of [bench] run in tuneloop.toml changed; a turn changes one knob's argument"),
            (E::NotAKnobWord { word: 3, was: s("train.py") }, "word 3 of [bench] run (`train.py`) changed, but it passes no DataLoader knob's value"),
            (E::BeyondTheValue { was: s("-j2"), now: s("-k2"), flag: s("-j") }, "`-j2` in [bench] run became `-k2`: only the value after -j may change"),
            (E::WrapperRefuses { flag: s("-j"), to: s("0"), why: s("`max(1, ·)` turns 0 into 1") }, "-j 0 in [bench] run: `max(1, ·)` turns 0 into 1"),
            (E::NotAKnobFlag { flag: s("--epochs"), to: s("3") }, "`--epochs 3` was added to [bench] run, but --epochs sets no DataLoader knob the command leaves unset"),
            (E::WordsAddedOrLost, "[bench] run in tuneloop.toml gained or lost words; a turn changes one knob's argument"),
        ] {
            assert_eq!(e.to_string(), words);
        }
    }
}
