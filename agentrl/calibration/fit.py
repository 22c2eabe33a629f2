"""What a frozen substrate was fitted to and what was held out, and what its per-turn cost does, as data and as the
two sentences notebooks 06-10 show (TINYAGENT.md says the rest): read from the study's committed record, so a new
freeze rewrites them.
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
    """What the record says of a named substrate's fit: its trial, rows held on the search and confirmation seeds, how
    the freeze rule chose it, where the chapter shows the numbers it was fitted to, and its per-turn cost."""
    record, where = trial_record(name, repo), source(name)
    decision, _ = decision_from_export(json.loads((Path(repo) / where.study / 'trials.json').read_text()))
    confirmation = record.get('confirmation') or {}
    config = SubstrateConfig.from_description(record['config'])
    plain, costly = turn_cost_example(config.turn_cost)
    return dict(name=name, study=where.study, trial=record['number'], rows=len(ROWS), counts=fitted_counts(),
                rows_held=record['rows_held'], seeds=record['seeds'],
                confirmation_rows_held=confirmation.get('rows_held'), confirmation_seeds=confirmation.get('seeds'),
                confirm_rows=CONFIRM_ROWS, by_fallback=decision.frozen == record['number'] and not decision.confirmed,
                compared=decision.compared,
                turn_cost=config.turn_cost, example=(plain, costly))


def _span(seeds):
    return f'{seeds[0]}–{seeds[-1]}' if list(seeds) == list(range(seeds[0], seeds[-1] + 1)) else ', '.join(map(str, seeds))


_NUMBER_WORDS = ('no', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten')


def number_word(n):
    """3 -> 'three' up to ten; larger counts as digits."""
    return _NUMBER_WORDS[n] if 0 <= n < len(_NUMBER_WORDS) else str(n)


def below_the_rule(confirm_rows, candidates):
    """What follows the rows a fallback-frozen trial holds on the confirmation seeds, in the README: `confirm_rows` is
    what the freeze rule asked for there, `candidates` how many trials its fallback measured there. Those seeds chose
    the trial, so its count there is the largest of `candidates`, not an untouched score."""
    many = number_word(candidates)
    return (f", below the {confirm_rows} the freeze rule asked for there: no trial met that rule, and the rule's "
            f"fallback froze the best of {many} on the confirmation seeds, so that count is a selected maximum, not "
            "an untouched score")


def fit_note(facts, link='../TINYAGENT.md'):
    """Two sentences on a substrate's fit and its per-turn cost (Markdown), from fit_facts, with a link to the page
    that says how our TinyAgent differs from the book's (`link`: relative to where the note is shown)."""
    counts = facts['counts']
    return (f"TinyAgent here is trial {facts['trial']} of the recorded calibration search (`{facts['study']}/`), "
            f"fitted to bands around {facts['rows']} of the book's numbers on the RL base, the unregularised run and "
            f"the single 10.6 batch ({counts['output']} printed in chapter 10's output blocks, {counts['prose']} "
            f"stated in its prose, {counts['derived']} derived); only the regularised settings were held out. Its "
            f"GRPO also charges {facts['turn_cost']:.3f} advantage units per turn above the group's mean (trial "
            f"{facts['trial']}'s `turn_cost`; the other substrates' differ, and the book's GRPO has none): "
            f"[TINYAGENT.md]({link}) says how our TinyAgent differs from the book's and what the confirmation seeds "
            "can and cannot show.")


def fit_clause(rows, counts):
    """What a substrate was fitted to and what was held out, in one clause for the README's substrate line: `rows`
    calibration rows, `counts` as fitted_counts gives them."""
    return (f"fitted to bands around {rows} of the book's numbers on the RL base, the unregularised run and the single "
            f"10.6 batch, that batch pushed at 10.6's own settings ({counts['output']} printed in chapter 10's output "
            f"blocks, {counts['prose']} stated in its prose, {counts['derived']} derived), with only the regularised "
            "settings held out")
