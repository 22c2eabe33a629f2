"""What a frozen substrate was fitted to and what was held out, and what its per-turn cost does, as data and as the
paragraph notebooks 06-10 show: read from the study's committed record, so a new freeze rewrites the paragraph.
"""
import json
from pathlib import Path

import torch

from agentrl.calibration.freeze import CONFIRM_ROWS, decision_from_export
from agentrl.calibration.rows import ROWS, fitted_counts
from agentrl.calibration.substrates import source, trial_record
from agentrl.paths import REPO
from agentrl.substrate.config import SubstrateConfig
from agentrl.substrate.grpo import RLConfig, compute_advantages

# The worked example of the per-turn cost: a group of eight with one success, whose episodes average three turns;
# the episode followed is the failure at index 1, which took two turns.
EXAMPLE_REWARDS = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
EXAMPLE_TURNS = (3, 2, 3, 3, 3, 3, 4, 3)
EXAMPLE_EPISODE = 1


def turn_cost_example(turn_cost):
    """(advantage without the cost, advantage with `turn_cost`) of the example's followed episode, by the engine's
    compute_advantages."""
    batch = dict(rewards=torch.tensor(EXAMPLE_REWARDS), n_turns=torch.tensor(EXAMPLE_TURNS))
    plain, costly = (compute_advantages(batch, RLConfig(group_size=len(EXAMPLE_REWARDS), turn_cost=cost))
                     for cost in (0.0, turn_cost))
    return plain[EXAMPLE_EPISODE].item(), costly[EXAMPLE_EPISODE].item()


def fit_facts(name='t45', repo=REPO):
    """What the record says of a named substrate's fit: its trial, rows held on the search and unseen seeds, how the
    freeze rule chose it, where the chapter shows the numbers it was fitted to, and its per-turn cost."""
    record, where = trial_record(name, repo), source(name)
    decision, _ = decision_from_export(json.loads((Path(repo) / where.study / 'trials.json').read_text()))
    confirmation = record.get('confirmation') or {}
    config = SubstrateConfig.from_description(record['config'])
    plain, costly = turn_cost_example(config.turn_cost)
    return dict(name=name, study=where.study, trial=record['number'], rows=len(ROWS), counts=fitted_counts(),
                rows_held=record['rows_held'], seeds=record['seeds'],
                unseen_rows_held=confirmation.get('rows_held'), unseen_seeds=confirmation.get('seeds'),
                confirm_rows=CONFIRM_ROWS, by_fallback=decision.frozen == record['number'] and not decision.confirmed,
                compared=decision.compared,
                turn_cost=config.turn_cost, example=(plain, costly))


def _span(seeds):
    return f'{seeds[0]}–{seeds[-1]}' if list(seeds) == list(range(seeds[0], seeds[-1] + 1)) else ', '.join(map(str, seeds))


_NUMBER_WORDS = ('no', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten')


def below_the_rule(confirm_rows, candidates):
    """What follows the rows a fallback-frozen trial holds on the unseen seeds, in the notebooks and the README:
    `confirm_rows` is what the freeze rule asked for there, `candidates` how many trials its fallback confirmed."""
    many = _NUMBER_WORDS[candidates] if candidates < len(_NUMBER_WORDS) else str(candidates)
    return (f", below the {confirm_rows} the freeze rule asked for there: no trial met that rule, and the rule's "
            f"fallback froze the best of {many} on the unseen seeds")


def fit_note(facts):
    """The paragraph on a substrate's fit and its per-turn cost (Markdown), from fit_facts."""
    counts, rows = facts['counts'], facts['rows']
    fitted = (f"TinyAgent here is trial {facts['trial']} of the recorded calibration search (`{facts['study']}/`). "
              f"It was chosen to land inside bands around {rows} of the book's numbers, all of them at chapter 9's "
              "settings as chapter 10 prints them: the RL base, the unregularised run and the single 10.6 batch at "
              f"clip_high 0.2. Of the {rows}, {counts['output']} are printed in the chapter's output blocks (the row "
              "`none` of 10.7, the trajectory of `none` in 10.8, the 10.6 batch, the parameter count), "
              f"{counts['prose']} are stated in its prose and {counts['derived']} are derived from those "
              "(`agentrl/calibration/rows.py` lists each). Every regularised setting was held out of the fit: where "
              "our `none` agrees with the book, that agreement is what the fit aimed for, not evidence; the "
              "regularised settings are the test.")
    if facts['unseen_rows_held'] is not None:
        held = (f" It holds {facts['rows_held']} of the {rows} on seeds {_span(facts['seeds'])} and "
                f"{facts['unseen_rows_held']} on the unseen seeds {_span(facts['unseen_seeds'])}")
        fitted += held + (below_the_rule(facts['confirm_rows'], facts['compared']) if facts['by_fallback'] else '') + '.'
    plain, costly = facts['example']
    cost = (f"**The per-turn cost.** Every run charges {facts['turn_cost']:.3f} advantage units for each turn an "
            "episode takes above its group's mean, in groups whose rewards differ (the substrate's `turn_cost`; at "
            "0 the engine is the chapter's group-normalised GRPO). It is not small: in a group of eight with one "
            f"success whose episodes average three turns, a failed two-turn episode gets {costly:+.3f} instead of "
            f"{plain:+.3f}.")
    return f"**What the substrate was fitted to.** {fitted}\n\n{cost}"


def fit_clause(rows, counts):
    """What a substrate was fitted to and what was held out, in one clause for the README's substrate line: `rows`
    calibration rows, `counts` as fitted_counts gives them."""
    return (f"fitted to bands around {rows} of the book's numbers at chapter 9's settings as chapter 10 prints them "
            f"({counts['output']} printed in its output blocks, {counts['prose']} in its prose, {counts['derived']} "
            "derived), with every regularised setting held out")
