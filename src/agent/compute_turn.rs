//! The builtin agent's compute turn: once the loader is settled (or cannot
//! be changed), the first compute knob of [`compute::plan`] that can be
//! written, written into the script. What the knobs are and which are left
//! is [`crate::compute`] (none while the loader binds: [`compute::gate`]);
//! this module is the agent's side of it (it writes the project's file and
//! reports as an agent).

use crate::agent::{AgentReport, TurnContext};
use crate::compute;
use crate::knob::{ComputeKnob, Numerics};
use crate::turn::AgentInfo;

/// Whether DataLoader settings cannot help any more: data_wait is below the
/// policy's share, or the incumbent is at the step-alone ceiling. Then the
/// step itself is what to make faster.
pub fn loader_settled(ctx: &TurnContext<'_>) -> bool {
    let d = &ctx.policy.decision;
    let share = ctx.incumbent.data_wait_share;
    share.is_some_and(|s| s < d.stop_when_data_wait_below)
        || crate::judge::credible_ceiling_share(ctx.incumbent_sps, ctx.ceiling_sps, share)
            .is_some_and(|s| s >= d.stop_when_ceiling_share_above)
}

/// The builtin agent's compute turn: the first knob of its [`compute::Plan`] that
/// can be written, written there. `None` when none is left.
/// `preferred` is the entry's module or the command's script. `why`: why
/// the loader gets no turn, when it is not settled (its knobs cannot be
/// edited, its candidates are exhausted); `None`: it is settled.
pub fn propose(
    ctx: &TurnContext<'_>,
    preferred: Option<&str>,
    why: Option<&str>,
) -> Option<AgentReport> {
    let started = std::time::Instant::now();
    let root = ctx.project_root;
    let plan = compute::plan(
        ctx.policy,
        ctx.history,
        ctx.incumbent,
        ctx.step_parts.as_ref(),
        root,
        &ctx.ws.file.project.editable,
        preferred,
    );
    let (knob, new_src) = plan.ready.first()?;
    let file = plan.file.as_deref()?;
    let mut report = AgentReport {
        info: AgentInfo {
            backend: "builtin".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let change = crate::edit::compute::recognize(&plan.src, new_src)
        .map(|e| format!("{} at {file}:{}", e.change, e.line))
        .unwrap_or_else(|| knob.name().to_string());
    let loader = why.unwrap_or("the loader is settled");
    let why = match knob.numerics() {
        Numerics::Preserving => format!("{loader}; numerics-preserving"),
        Numerics::Changing => {
            format!("{loader}; may change the numerics (losses checked against the baseline)")
        }
    };
    match crate::fsio::write_atomic(&root.join(file), new_src.as_bytes()) {
        Ok(()) => report.summary = format!("{change} ({why})"),
        Err(e) => report.failure = Some(format!("cannot write {file}: {e}")),
    }
    // The knobs passed over before this one (the report lists them all once).
    let order = |k: &ComputeKnob| ComputeKnob::ALL.iter().position(|a| a == k);
    let before: Vec<String> = plan
        .skipped
        .iter()
        .filter(|(k, _)| order(k) < order(knob))
        .map(|(k, why)| format!("{k}: {why}"))
        .collect();
    if !before.is_empty() {
        report
            .summary
            .push_str(&format!("; skipped: {}", before.join("; ")));
    }
    report.info.exit_code = Some(if report.failure.is_some() { 1 } else { 0 });
    report.info.duration_ms = started.elapsed().as_millis() as u64;
    Some(report)
}
