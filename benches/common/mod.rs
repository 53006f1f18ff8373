//! What the benchmarks share: sizes from the environment, the machine's
//! description, and writing one section of bench/RESULTS.md.

#![allow(dead_code)] // each bench uses its own subset

use std::path::Path;

/// `cargo bench` passes `--bench`; `cargo test --all-targets` runs a bench's
/// `main` without it. Benchmarks take minutes: they run only when asked.
pub fn skip_unless_benchmarking(name: &str) -> bool {
    if std::env::args().any(|a| a == "--bench") {
        return false;
    }
    eprintln!("{name} is a benchmark: run it with `cargo bench --bench {name}` (skipped under cargo test)");
    true
}

/// A size from the environment, or its default.
pub fn env_u(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The CPU model and core count, plus `BENCH_MACHINE` (e.g. that the box is shared).
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let note = std::env::var("BENCH_MACHINE").unwrap_or_default();
    if note.is_empty() {
        format!("{cores} cores, {model}")
    } else {
        format!("{cores} cores, {model}; {note}")
    }
}

/// Replaces (or appends) the `## {title}` section of RESULTS.md, leaving the
/// other sections alone.
pub fn write_section(path: &Path, title: &str, body: &str) {
    let old = std::fs::read_to_string(path).unwrap_or_else(|_| "# Benchmark results\n".into());
    let new = replace_section(&old, title, body);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, new).unwrap();
}

/// The text of RESULTS.md with the `## {title}` section replaced or appended.
pub fn replace_section(old: &str, title: &str, body: &str) -> String {
    let head = format!("## {title}\n");
    let section = format!("{head}\n{body}\n");
    match old.find(&head) {
        Some(start) => {
            let rest = &old[start + head.len()..];
            let end = rest
                .find("\n## ")
                .map(|i| start + head.len() + i + 1)
                .unwrap_or(old.len());
            format!("{}{}{}", &old[..start], section, &old[end..])
        }
        None => format!(
            "{}\n{}",
            old.trim_end_matches('\n').to_string() + "\n",
            section
        ),
    }
}
