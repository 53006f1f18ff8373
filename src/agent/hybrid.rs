//! `backend = "hybrid"`: each agent takes the turns it is best at. The
//! builtin agent settles the DataLoader knobs — free, deterministic, seconds
//! a turn —; only when it has nothing left does Claude Code get a turn, for
//! the structural change no knob makes (the `preprocessing` knob), and only
//! while that can still pay: data_wait is still a real share of the step
//! (at least `stop_when_data_wait_below`), the incumbent is far from the
//! ceiling (under `stop_when_ceiling_share_above` of it), the policy allows
//! `preprocessing`, and the run's `max_total_usd` is not spent (each call's
//! `--max-budget-usd` is capped at what is left of it).
//!
//! The builtin agent is asked first on every turn, also after a Claude turn:
//! a structural change moves the figures, and a knob may then pay again.
//! Each turn's `agent.backend` records which agent made it.

use crate::config::Policy;
use crate::knob::LoaderKnob;
use crate::turn::TurnRow;

use super::builtin::BuiltinAgent;
use super::claude::ClaudeAgent;
use super::{AgentReport, TurnContext};

pub struct HybridAgent {
    builtin: BuiltinAgent,
    claude: ClaudeAgent,
    /// The policy lets Claude Code make structural changes at all.
    structural: bool,
}

/// What decides whether Claude Code takes a turn the builtin agent cannot.
#[derive(Clone, Debug, PartialEq)]
pub struct HandoffFacts {
    pub preprocessing_allowed: bool,
    pub data_wait_share: Option<f64>,
    pub stop_when_data_wait_below: f64,
    pub incumbent_sps: f64,
    pub ceiling_sps: Option<f64>,
    pub stop_when_ceiling_share_above: f64,
    /// USD the run's agent calls have cost so far.
    pub spent_usd: f64,
    /// `[loop] max_total_usd`; 0 = no limit.
    pub max_total_usd: f64,
}

impl HandoffFacts {
    pub fn of(policy: &Policy, ctx: &TurnContext<'_>) -> HandoffFacts {
        HandoffFacts {
            preprocessing_allowed: policy.loop_.allows(LoaderKnob::Preprocessing),
            data_wait_share: ctx.incumbent.data_wait_share,
            stop_when_data_wait_below: policy.decision.stop_when_data_wait_below,
            incumbent_sps: ctx.incumbent_sps,
            ceiling_sps: ctx.ceiling_sps,
            stop_when_ceiling_share_above: policy.decision.stop_when_ceiling_share_above,
            spent_usd: spent(ctx.history),
            max_total_usd: policy.loop_.max_total_usd,
        }
    }
}

/// What the run's agent calls have cost so far.
pub fn spent(history: &[TurnRow]) -> f64 {
    crate::turn::total_cost_usd(history)
}

/// Why Claude Code does not take the turn once the knobs are settled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoHandoff {
    #[error("the knobs are settled, and structural changes need `preprocessing` in [loop] knobs")]
    NotAllowed,
    #[error("the knobs are settled and data_wait is only {:.1}% of the step: a structural change has little to win", .share * 100.0)]
    LittleDataWait { share: f64 },
    #[error("the knobs are settled and the incumbent is at {:.0}% of the ceiling", .share * 100.0)]
    NearCeiling { share: f64 },
    #[error(
        "the knobs are settled and the cost budget is spent (${spent_usd:.2} of ${max_usd:.2})"
    )]
    BudgetSpent { spent_usd: f64, max_usd: f64 },
}

/// `Ok` when Claude Code should take the turn; else why not, in words that
/// end the run ("candidates exhausted: …").
pub fn handoff(f: &HandoffFacts) -> Result<(), NoHandoff> {
    if !f.preprocessing_allowed {
        return Err(NoHandoff::NotAllowed);
    }
    if let Some(s) = f.data_wait_share {
        if s < f.stop_when_data_wait_below {
            return Err(NoHandoff::LittleDataWait { share: s });
        }
    }
    let share =
        crate::judge::credible_ceiling_share(f.incumbent_sps, f.ceiling_sps, f.data_wait_share);
    if let Some(x) = share.filter(|x| *x >= f.stop_when_ceiling_share_above) {
        return Err(NoHandoff::NearCeiling { share: x });
    }
    if f.max_total_usd > 0.0 && f.spent_usd >= f.max_total_usd {
        return Err(NoHandoff::BudgetSpent {
            spent_usd: f.spent_usd,
            max_usd: f.max_total_usd,
        });
    }
    Ok(())
}

/// The policy Claude Code's turn runs under: the structural knob only, and
/// a call budget no larger than what is left of the run's.
pub fn structural_policy(policy: &Policy, spent_usd: f64) -> Policy {
    let mut p = policy.clone();
    p.loop_.knobs = vec![LoaderKnob::Preprocessing.name().into()];
    if p.loop_.max_total_usd > 0.0 {
        let left = (p.loop_.max_total_usd - spent_usd).max(0.01);
        p.agent.max_budget_usd = Some(p.agent.max_budget_usd.map_or(left, |b| b.min(left)));
    }
    p
}

impl HybridAgent {
    pub fn new(policy: &Policy, ws: &crate::config::Workspace) -> HybridAgent {
        HybridAgent {
            builtin: BuiltinAgent::new(ws),
            claude: ClaudeAgent::new(policy, ws),
            structural: policy.loop_.allows(LoaderKnob::Preprocessing),
        }
    }

    /// The builtin part, which makes the knob and compute turns.
    pub fn builtin(&self) -> &BuiltinAgent {
        &self.builtin
    }

    /// Claude Code must be there when it may get turns; a policy without
    /// `preprocessing` never calls it.
    pub fn preflight(&self) -> Result<(), super::claude::ProgramNotFound> {
        if self.structural {
            self.claude.preflight()
        } else {
            Ok(())
        }
    }

    pub async fn propose(
        &mut self,
        ctx: &TurnContext<'_>,
        on_tool: &mut (dyn FnMut(&str, &str) + Send),
    ) -> AgentReport {
        let mut rep = self.builtin.propose(ctx);
        if !rep.exhausted {
            return rep;
        }
        let facts = HandoffFacts::of(ctx.policy, ctx);
        if let Err(why) = handoff(&facts) {
            rep.summary = why.to_string();
            rep.stop_note = Some(format!("candidates exhausted: {why}"));
            return rep;
        }
        let policy = structural_policy(ctx.policy, facts.spent_usd);
        let structural = TurnContext {
            turn: ctx.turn,
            max_iterations: ctx.max_iterations,
            ws: ctx.ws,
            policy: &policy,
            project_root: ctx.project_root,
            incumbent: ctx.incumbent,
            incumbent_sps: ctx.incumbent_sps,
            ceiling_sps: ctx.ceiling_sps,
            history: ctx.history,
            profile_table: ctx.profile_table,
            step_parts: ctx.step_parts,
            turn_dir: ctx.turn_dir.clone(),
            interrupt: ctx.interrupt,
            only_cheaper: ctx.only_cheaper,
        };
        self.claude.propose(&structural, on_tool).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> HandoffFacts {
        HandoffFacts {
            preprocessing_allowed: true,
            data_wait_share: Some(0.6),
            stop_when_data_wait_below: 0.1,
            incumbent_sps: 1000.0,
            ceiling_sps: Some(5000.0),
            stop_when_ceiling_share_above: 0.95,
            spent_usd: 0.5,
            max_total_usd: 5.0,
        }
    }

    #[test]
    fn claude_takes_the_turn_only_while_a_structural_change_can_pay() {
        assert_eq!(handoff(&facts()), Ok(()));
        // Unknown share or ceiling (contract mode): nothing says it cannot pay.
        let mut f = facts();
        f.data_wait_share = None;
        f.ceiling_sps = None;
        assert_eq!(handoff(&f), Ok(()));
        let no = |f: HandoffFacts, word: &str| {
            let e = handoff(&f).unwrap_err().to_string();
            assert!(e.contains(word), "{word} not in {e}");
        };
        let mut f = facts();
        f.preprocessing_allowed = false;
        assert_eq!(handoff(&f), Err(NoHandoff::NotAllowed));
        no(f, "`preprocessing` in [loop] knobs");
        let mut f = facts();
        f.data_wait_share = Some(0.05);
        no(f, "data_wait is only 5.0%");
        let mut f = facts();
        f.incumbent_sps = 4800.0;
        f.data_wait_share = Some(0.05);
        f.stop_when_data_wait_below = 0.0;
        no(f, "96% of the ceiling");
        // Near a ceiling the incumbent's own data_wait contradicts: the
        // ceiling run was disturbed, a structural change may still pay.
        let mut f = facts();
        f.incumbent_sps = 4800.0;
        assert_eq!(handoff(&f), Ok(()));
        let mut f = facts();
        f.spent_usd = 5.0;
        no(f, "budget is spent ($5.00 of $5.00)");
        // No run budget: no limit.
        let mut f = facts();
        f.spent_usd = 50.0;
        f.max_total_usd = 0.0;
        assert_eq!(handoff(&f), Ok(()));
    }

    #[test]
    fn the_structural_turn_offers_preprocessing_within_what_is_left_of_the_budget() {
        let mut p = Policy::default();
        p.loop_.knobs.push("preprocessing".into());
        p.loop_.max_total_usd = 1.5;
        p.agent.max_budget_usd = Some(1.0);
        let s = structural_policy(&p, 0.75);
        assert_eq!(s.loop_.knobs, ["preprocessing"]);
        assert_eq!(s.agent.max_budget_usd, Some(0.75));
        assert_eq!(structural_policy(&p, 0.1).agent.max_budget_usd, Some(1.0));
        p.loop_.max_total_usd = 0.0;
        assert_eq!(structural_policy(&p, 9.0).agent.max_budget_usd, Some(1.0));
    }
}
