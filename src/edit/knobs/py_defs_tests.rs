//! Knobs whose literal is defined in the project's own Python modules
//! ([`super::super::py_defs`]): each form resolved, edited at that literal
//! alone, and checked as one change; ambiguous and overridden ones not.

use std::collections::HashMap;

use super::tests::{project, sites_in};
use super::*;

fn set(files: &HashMap<String, String>, site: &KnobSite, knob: &str, v: &str) -> (String, String) {
    let read = |p: &str| files.get(p).cloned();
    set_knob(site, knob, v, &read).unwrap()
}

const CONFIG: &str = r#"from dataclasses import dataclass


@dataclass
class Config:
    data_root: str = "data"
    batch_size: int = 24
    num_workers: int = 0
    epochs: int = 2
"#;

/// The held-out pattern: the loader built in data.py from a `cfg` it is
/// given; data.py does not import config.py, train.py does.
const DATA: &str = r#"from torch.utils.data import DataLoader


def build_loaders(cfg):
    train = make_dataset(cfg.data_root, "train")
    val = make_dataset(cfg.data_root, "val")
    train_loader = DataLoader(train, batch_size=cfg.batch_size, shuffle=True, num_workers=cfg.num_workers, drop_last=True)
    val_loader = DataLoader(val, batch_size=cfg.batch_size, num_workers=int(cfg.num_workers))
    return train_loader, val_loader
"#;

const TRAIN: &str = r#"from config import Config
from data import build_loaders


def run(cfg):
    train_loader, val_loader = build_loaders(cfg)


if __name__ == "__main__":
    run(Config())
"#;

const WORKSPACE: &str = "[project]\nroot = \".\"\n\n[bench]\nrun = [\"python\", \"train.py\"]\n";

#[test]
fn a_dataclass_default_feeds_cfg_num_workers_through_the_entry_scripts_imports() {
    let p = project(&[
        ("config.py", CONFIG),
        ("data.py", DATA),
        ("train.py", TRAIN),
        ("tuneloop.toml", WORKSPACE),
    ]);
    let sites = sites_in(&p, "data.py");
    let nw = sites[0].origin("num_workers").unwrap();
    assert!(
        matches!(&nw.source, Source::Python { file, line: 8, name, value, .. }
            if file == "config.py" && name == "Config.num_workers" && value == "0"),
        "{nw:?}"
    );
    assert_eq!(
        nw.describe(&sites[0].at()),
        "num_workers = cfg.num_workers → Config.num_workers = 0 (config.py:8)"
    );
    assert_eq!(sites[0].effective_call().kwarg("num_workers"), Some("0"));
    // Through a wrapper too.
    let val = sites[1].origin("num_workers").unwrap();
    assert!(matches!(&val.source, Source::Python { name, .. } if name == "Config.num_workers"));
    assert_eq!(
        val.wrapper.as_ref().map(|w| w.written.as_str()),
        Some("int(·)")
    );
    // The edit is that literal's bytes, nothing else.
    let (file, out) = set(&p, &sites[0], "num_workers", "8");
    assert_eq!(file, "config.py");
    assert_eq!(
        out,
        CONFIG.replace("num_workers: int = 0", "num_workers: int = 8")
    );
    // A turn that makes it is one change; more than it is refused.
    let all: Vec<KnobSite> = ["data.py", "train.py"]
        .iter()
        .flat_map(|f| sites_in(&p, f))
        .collect();
    let c = python_value_edit("config.py", CONFIG, &out, &all)
        .unwrap()
        .unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].knob.as_str(), c[0].change.as_str()),
        (
            "num_workers",
            "num_workers 0 → 8 (Config.num_workers, config.py:8)"
        )
    );
    let more = out.replace("epochs: int = 2", "epochs: int = 1");
    let err = python_value_edit("config.py", CONFIG, &more, &all)
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(err.contains("changed beyond the values"), "{err}");
    let computed = CONFIG.replace("num_workers: int = 0", "num_workers: int = os.cpu_count()");
    assert!(python_value_edit("config.py", CONFIG, &computed, &all)
        .unwrap()
        .unwrap_err()
        .to_string()
        .contains("no longer a literal"));
    // Another field alone is no knob change here.
    let epochs = CONFIG.replace("epochs: int = 2", "epochs: int = 1");
    assert_eq!(python_value_edit("config.py", CONFIG, &epochs, &all), None);
    // Without the workspace file, data.py alone does not reach config.py.
    let alone = project(&[
        ("config.py", CONFIG),
        ("data.py", DATA),
        ("train.py", TRAIN),
    ]);
    let s = &sites_in(&alone, "data.py")[0];
    assert!(!s.origin("num_workers").unwrap().editable());
    // knob_files names config.py for data.py given the entry script.
    let d = tempfile::tempdir().unwrap();
    for (f, t) in &alone {
        std::fs::write(d.path().join(f), t).unwrap();
    }
    assert_eq!(
        knob_files(d.path(), "data.py", Some("train.py")),
        vec!["config.py".to_string()]
    );
    assert!(knob_files(d.path(), "data.py", None).is_empty());
}

#[test]
fn a_plain_class_attribute_and_a_nested_dataclass_are_followed() {
    let config = r#"from dataclasses import dataclass, field


class Paths:
    root = "data"


@dataclass
class DataConfig:
    batch_size: int = 32
    num_workers: int = 1
    pin_memory: bool = field(default=False)


@dataclass
class EvalConfig:
    num_workers: int = 4


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
"#;
    let data = "from torch.utils.data import DataLoader\nfrom config import Config\n\n\ndef loaders(cfg: Config):\n    return DataLoader(ds, batch_size=cfg.data.batch_size, num_workers=cfg.data.num_workers, pin_memory=cfg.data.pin_memory)\n";
    let p = project(&[("config.py", config), ("data.py", data)]);
    let s = &sites_in(&p, "data.py")[0];
    let nw = s.origin("num_workers").unwrap();
    assert!(
        matches!(&nw.source, Source::Python { name, value, line: 11, .. } if name == "DataConfig.num_workers" && value == "1"),
        "{nw:?}"
    );
    let pin = s.origin("pin_memory").unwrap();
    assert!(
        matches!(&pin.source, Source::Python { name, value, .. } if name == "DataConfig.pin_memory" && value == "False"),
        "{pin:?}"
    );
    let (_, out) = set(&p, s, "pin_memory", "True");
    assert_eq!(
        out,
        config.replace("field(default=False)", "field(default=True)")
    );
    // A plain (non-dataclass) class attribute.
    let plain = "class Settings:\n    workers = 0\n    lr = 0.1\n";
    let data = "from torch.utils.data import DataLoader\nfrom settings import Settings\n\nDataLoader(ds, num_workers=Settings.workers)\n";
    let p = project(&[("settings.py", plain), ("data.py", data)]);
    let s = &sites_in(&p, "data.py")[0];
    assert!(matches!(&s.origin("num_workers").unwrap().source,
        Source::Python { file, name, .. } if file == "settings.py" && name == "Settings.workers"));
    let (_, out) = set(&p, s, "num_workers", "6");
    assert_eq!(out, plain.replace("workers = 0", "workers = 6"));
}

#[test]
fn module_dicts_and_imported_constants_are_followed() {
    let config = "import os\n\nCFG = {\n    \"data\": {\"num_workers\": 0, \"prefetch\": 2},\n    \"lr\": 0.1,\n}\nLOADER = dict(num_workers=2, persistent=False)\nNUM_WORKERS = 3\n";
    let data = r#"from torch.utils.data import DataLoader
from config import CFG, LOADER, NUM_WORKERS as NW
import config as C


def a():
    return DataLoader(ds, num_workers=CFG["data"]["num_workers"], prefetch_factor=CFG["data"]["prefetch"])


def b():
    return DataLoader(ds, num_workers=LOADER["num_workers"], persistent_workers=LOADER["persistent"])


def c():
    return DataLoader(ds, num_workers=NW, prefetch_factor=C.NUM_WORKERS)
"#;
    let p = project(&[("config.py", config), ("data.py", data)]);
    let sites = sites_in(&p, "data.py");
    let name = |i: usize, knob: &str| match &sites[i].origin(knob).unwrap().source {
        Source::Python {
            name, value, line, ..
        } => format!("{name} = {value} (l.{line})"),
        other => format!("{other:?}"),
    };
    assert_eq!(
        name(0, "num_workers"),
        r#"CFG["data"]["num_workers"] = 0 (l.4)"#
    );
    assert_eq!(
        name(0, "prefetch_factor"),
        r#"CFG["data"]["prefetch"] = 2 (l.4)"#
    );
    assert_eq!(name(1, "num_workers"), r#"LOADER["num_workers"] = 2 (l.7)"#);
    assert_eq!(
        name(1, "persistent_workers"),
        r#"LOADER["persistent"] = False (l.7)"#
    );
    assert_eq!(name(2, "num_workers"), "NUM_WORKERS = 3 (l.8)");
    assert_eq!(name(2, "prefetch_factor"), "NUM_WORKERS = 3 (l.8)");
    let (file, out) = set(&p, &sites[0], "num_workers", "8");
    assert_eq!(file, "config.py");
    assert_eq!(
        out,
        config.replace("{\"num_workers\": 0,", "{\"num_workers\": 8,")
    );
    let (_, out) = set(&p, &sites[1], "num_workers", "5");
    assert_eq!(
        out,
        config.replace("dict(num_workers=2,", "dict(num_workers=5,")
    );
    let (_, out) = set(&p, &sites[2], "num_workers", "7");
    assert_eq!(out, config.replace("NUM_WORKERS = 3", "NUM_WORKERS = 7"));
    // NUM_WORKERS feeds two knobs: changing it is not one knob's change.
    let err = python_value_edit("config.py", config, &out, &sites)
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(err.contains("feeds several knobs"), "{err}");
}

#[test]
fn several_matching_definitions_or_a_runtime_write_leave_it_unresolved() {
    let config = "from dataclasses import dataclass\n\n@dataclass\nclass TrainConfig:\n    num_workers: int = 0\n\n@dataclass\nclass EvalConfig:\n    num_workers: int = 2\n";
    let p = project(&[
        ("config.py", config),
        ("data.py", DATA),
        ("train.py", TRAIN.replace("Config", "TrainConfig").as_str()),
        ("tuneloop.toml", WORKSPACE),
    ]);
    let nw = sites_in(&p, "data.py")[0]
        .origin("num_workers")
        .unwrap()
        .clone();
    assert!(!nw.editable());
    let d = nw.describe("data.py:7");
    assert!(
        d.contains("matches 2 definitions")
            && d.contains("TrainConfig.num_workers = 0 (config.py:5)")
            && d.contains("EvalConfig.num_workers = 2 (config.py:9)"),
        "{d}"
    );
    // The default is overridden where the config is made.
    let train = TRAIN.replace("run(Config())", "run(Config(num_workers=4))");
    let p = project(&[
        ("config.py", CONFIG),
        ("data.py", DATA),
        ("train.py", &train),
        ("tuneloop.toml", WORKSPACE),
    ]);
    let d = sites_in(&p, "data.py")[0]
        .origin("num_workers")
        .unwrap()
        .describe("data.py:7");
    assert!(
        d.contains("not editable")
            && d.contains("`Config(num_workers=…)` (train.py:10) sets it at run time"),
        "{d}"
    );
    // … or assigned later.
    let train = TRAIN.replace(
        "    train_loader, val_loader",
        "    cfg.num_workers = 2\n    train_loader, val_loader",
    );
    let p = project(&[
        ("config.py", CONFIG),
        ("data.py", DATA),
        ("train.py", &train),
        ("tuneloop.toml", WORKSPACE),
    ]);
    let d = sites_in(&p, "data.py")[0]
        .origin("num_workers")
        .unwrap()
        .describe("data.py:7");
    assert!(d.contains("`cfg.num_workers = 2` (train.py:6)"), "{d}");
}
